// Command fleetbot reconciles a fleetbot control repo into one repo per
// cluster and one per workspace, as pull requests. It is the CLI front end:
// flags and environment live here and are resolved into one app.Config
// (config.go); internal/app, the one composition root, builds the forge,
// renderer, budget and cache from it for every command, the Action and serve
// (docs/architecture.md).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/heapfloor"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// version and commit are set at build time with -ldflags "-X main.version=... -X main.commit=...":
// make release stamps the release's version and the commit it was built from (it builds with
// -buildvcs=false, so a binary does not depend on the state of a .git directory; see
// docs/versioning.md). A build that stamps no commit falls back to the VCS revision the go
// command recorded, if any.
var (
	version = "dev"
	commit  = ""
)

func main() {
	if cmd, _, err := (&frontend{}).rootCommand().Find(os.Args[1:]); err == nil && !longRunning[cmd.Name()] {
		// A command that runs once lets its heap grow to 128 MiB before collecting; a server's
		// heap lives for days and keeps Go's default.
		heapfloor.Keep(heapfloor.Default)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// longRunning names the commands that serve until stopped (serve, dev git-serve).
var longRunning = map[string]bool{"serve": true, "git-serve": true}

// exitCode lets a command end the process with a chosen status, e.g. plan's
// --detailed-exitcode (2 = changes pending) without printing an error.
type exitCode = app.ExitCode

// run executes the CLI and returns the process exit status. Tests call it
// directly with their own args and writers.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return (&frontend{stdout: stdout, stderr: stderr}).run(ctx, args)
}

// run executes the CLI with a's streams (and, in tests, its terminal check).
func (a *frontend) run(ctx context.Context, args []string) int {
	stderr := a.stderr
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetOut(a.stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	a.prog.end()
	var code exitCode
	switch {
	case err == nil:
		return 0
	case errors.As(err, &code):
		return int(code)
	default:
		// A command that fails with an error exits 1 whatever the error's class: the detailed
		// codes (2 pending, 3 blocked) are a finished run's, chosen above from its Result.
		fmt.Fprintln(stderr, "error:", err)
		return report.ExitError
	}
}

// frontend holds what every command shares: output streams and global flags.
type frontend struct {
	stdout, stderr io.Writer

	control string
	forge   string
	// gitURLFlag is --git-url of the commands that render; see gitURL.
	gitURLFlag string
	logLevel   string
	logJSON    bool
	github     githubFlags
	// concurrency and fullEvery are --concurrency and --full-every of the commands that apply
	// (apply, serve); base puts them in the application configuration, the one place.
	concurrency int
	fullEvery   time.Duration
	// isTerminal says whether a writer is a terminal (nil: a real check of the file); tests
	// inject it to see the progress a terminal gets.
	isTerminal func(io.Writer) bool
	// prog is the run's progress display on stderr (progress()).
	prog *progress
	// now and newTicker are the clock and ticker of status --watch (nil: the system's);
	// tests inject them.
	now       func() time.Time
	newTicker func(time.Duration) (<-chan time.Time, func())
}

// terminal reports whether w is a terminal (isTerminal, else a real check of the file).
func (a *frontend) terminal(w io.Writer) bool {
	if a.isTerminal != nil {
		return a.isTerminal(w)
	}
	return fileIsTerminal(w)
}

// progress is the run's progress display: drawn on stderr while it is a terminal, nothing
// otherwise. Everything else a command writes on stderr goes through it.
func (a *frontend) progress() *progress {
	if a.prog == nil {
		a.prog = newProgress(a.stderr, a.isTerminal)
	}
	return a.prog
}

func (a *frontend) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "fleetbot",
		Short: "Fan a fleetbot control repo out into one repo per cluster and workspace, as pull requests",
		Long: `fleetbot reads a control repo (Platform, Cluster, Workspace and App objects),
renders the desired tree of one repo per cluster and one per workspace with
kustomize, and proposes it as a pull request per repo. Flux on each cluster
applies what lands.`,
		Example: `  # try it on the example control repo, with no GitHub: the local forge
  fleetbot validate --control testdata/control
  fleetbot apply --control testdata/control --forge local:.fleetbot/forge
  fleetbot status --control testdata/control --forge local:.fleetbot/forge

  # against GitHub, as the App's installation
  fleetbot plan --forge github --app-id 123456 --app-key private-key.pem`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// --version prints what `fleetbot version` prints.
		Version: version,
	}
	root.SetVersionTemplate("fleetbot {{.Version}}\n")
	pf := root.PersistentFlags()
	pf.StringVar(&a.control, "control", ".", "control repo directory")
	pf.StringVar(&a.forge, "forge", "", `where target repos live: "local:PATH" (git repos on disk) or "github"`)
	choiceVar(pf, &a.logLevel, "log-level", "warn", logLevels(), "log level")
	pf.BoolVar(&a.logJSON, "log-json", false, "log as JSON lines instead of text")
	a.github.register(pf)
	root.AddCommand(
		a.validateCommand(),
		a.renderCommand(),
		a.planCommand(),
		a.applyCommand(),
		a.versionCommand(),
		a.actionCommand(),
		a.devCommand(),
		a.checkCommand(),
		a.serveCommand(),
		a.statusCommand(),
		a.rolloutCommand(),
	)
	return root
}

// logger builds the run's logger on stderr from the global flags.
func (a *frontend) logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(a.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", a.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	if a.logJSON {
		opts.ReplaceAttr = durationSeconds
		return slog.New(slog.NewJSONHandler(a.progress(), opts)), nil
	}
	return slog.New(slog.NewTextHandler(a.progress(), opts)), nil
}

// durationSeconds writes a duration attribute of a JSON log line as seconds (a number, as
// Prometheus does), not slog's default nanoseconds; the text handler already writes it for
// people ("43ms", "1m30s").
func durationSeconds(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.Float64Value(a.Value.Duration().Seconds())
	}
	return a
}

func (a *frontend) versionCommand() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the fleetbot version",
		Long: `version prints the fleetbot version; with -o json, fleetbot's one report
(format_version, command "version") with the version, the Go release, the
platform and the commit it was built from (docs/report.md).`,
		Example: `  fleetbot version
  fleetbot --version
  # the report with a build section: version, commit, Go release, platform
  fleetbot version -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format == formatJSON {
				d := report.New(report.CommandVersion, "", nil)
				d.Build = buildInfo()
				return d.WriteJSON(a.stdout)
			}
			_, err := io.WriteString(a.stdout, versionLine())
			return err
		},
	}
	formatVar(cmd.Flags(), &format, []string{formatText, formatJSON})
	return cmd
}

// versionLine is the text of `fleetbot version` and `fleetbot --version`.
func versionLine() string {
	return "fleetbot " + version + "\n"
}

// buildInfo is the version of this binary: the -ldflags version, the Go release and platform,
// and the commit: the one -ldflags stamped (make release), else the VCS revision the go command
// recorded (none under go run or -buildvcs=false).
func buildInfo() *report.Build {
	b := &report.Build{Version: version, Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH, Revision: commit}
	if b.Revision != "" {
		return b
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				b.Revision = s.Value
			}
		}
	}
	return b
}
