// Command fakegithub runs the githubtest fake GitHub as a server for demos and manual tries.
//
//	go run ./internal/githubtest/cmd/fakegithub --addr 127.0.0.1:8080 --state /tmp/fakegh \
//	    --org acme --teams platform,payments-devs --app-key-out /tmp/fakegh/app.pem
//
// It prints the base URL and how to point fleetbot at it. Git data and metadata in --state
// survive restarts. Its App holds the permissions (and subscribes to the events) of the
// repository's app.yml, found above the working directory, or of --app-manifest FILE: the same
// model as the in-test server's (githubtest.AppManifest).
package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "fakegithub:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		addr      = flag.String("addr", "127.0.0.1:8080", "listen address")
		stateDir  = flag.String("state", "", "state directory (bare repos and state.json); default: a new temp dir")
		appID     = flag.Int64("app-id", githubtest.DefaultAppID, "GitHub App id")
		appSlug   = flag.String("app-slug", githubtest.DefaultAppSlug, "GitHub App slug")
		appKeyIn  = flag.String("app-key", "", "PEM file with the App private key (default: reuse STATE/app.pem or generate)")
		appKeyOut = flag.String("app-key-out", "", "write the App private key PEM here")
		token     = flag.String("token", githubtest.DefaultToken, "personal access token of the default user")
		org       = flag.String("org", "", "create this organization and install the App on it")
		teams     = flag.String("teams", "", "comma-separated team slugs to create in --org")
		hookURL   = flag.String("webhook-url", "", "deliver webhooks here")
		hookFile  = flag.String("webhook-url-file", "", "deliver webhooks to the URL this file holds at the time (for a receiver whose port is not known yet)")
		urlFile   = flag.String("url-file", "", "once listening, write the server's base URL (http://HOST:PORT) to this file; with --addr 127.0.0.1:0 the port is a free one")
		hookSec   = flag.String("webhook-secret", "", "webhook secret")
		primary   = flag.Int("primary-limit", githubtest.DefaultPrimaryLimit, "REST requests per hour per token (0: off)")
		ccMin     = flag.Int("content-per-minute", 0, "content-creating requests per minute (0: off)")
		ccHour    = flag.Int("content-per-hour", 0, "content-creating requests per hour (0: off)")
		scale     = flag.Float64("time-scale", 1, "fake time runs this many times faster than the wall clock")
		manifest  = flag.String("app-manifest", "", "the GitHub App manifest whose default_permissions installation tokens are held to and whose default_events webhooks carry (default: app.yml of the repository the working directory is in)")
	)
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))

	dir := *stateDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "fakegithub-")
		if err != nil {
			return fmt.Errorf("creating state dir: %w", err)
		}
		dir = tmp
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating state dir: %w", err)
	}
	keyPath := *appKeyIn
	if keyPath == "" {
		keyPath = filepath.Join(dir, "app.pem")
	}
	opts := []githubtest.Option{
		githubtest.WithApp(*appID, *appSlug),
		githubtest.WithUser(githubtest.DefaultUser, *token),
		githubtest.WithPrimaryLimit(*primary),
		githubtest.WithTimeScale(*scale),
		githubtest.WithLogger(logger),
	}
	// The App is fleetbot's, as the in-test server's is: a token may do only what app.yml
	// grants (githubtest.AppManifest).
	manifestPath := *manifest
	if manifestPath == "" {
		p, err := githubtest.RepoAppManifestPath()
		if err != nil {
			return fmt.Errorf("%w (give --app-manifest FILE)", err)
		}
		manifestPath = p
	}
	m, err := githubtest.LoadAppManifest(manifestPath)
	if err != nil {
		return err
	}
	opts = append(opts, githubtest.WithAppManifest(m))
	if *ccMin > 0 || *ccHour > 0 {
		opts = append(opts, githubtest.WithContentCreationLimit(*ccMin, *ccHour, true))
	}
	switch {
	case *hookURL != "" && *hookFile != "":
		return fmt.Errorf("--webhook-url and --webhook-url-file: give one")
	case *hookURL != "":
		opts = append(opts, githubtest.WithWebhook(*hookURL, *hookSec))
	case *hookFile != "":
		opts = append(opts, githubtest.WithWebhookURLFile(*hookFile, *hookSec))
	}
	if data, err := os.ReadFile(keyPath); err == nil {
		block, _ := pem.Decode(data)
		if block == nil {
			return fmt.Errorf("reading app key %s: no PEM block", keyPath)
		}
		key, err := x509.ParsePKCS1PrivateKey(block.Bytes)
		if err != nil {
			return fmt.Errorf("reading app key %s: %w", keyPath, err)
		}
		opts = append(opts, githubtest.WithAppKey(key))
	} else if *appKeyIn != "" {
		return fmt.Errorf("reading app key: %w", err)
	}

	srv, err := githubtest.New(dir, opts...)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", *addr, err)
	}
	srv.URL = "http://" + ln.Addr().String()

	pemData := srv.AppPrivateKeyPEM()
	if *appKeyIn == "" {
		if err := os.WriteFile(keyPath, pemData, 0o600); err != nil {
			return fmt.Errorf("saving app key: %w", err)
		}
	}
	if *appKeyOut != "" {
		if err := os.WriteFile(*appKeyOut, pemData, 0o600); err != nil {
			return fmt.Errorf("writing app key: %w", err)
		}
	}
	if *org != "" {
		id := srv.CreateOrg(*org)
		for _, t := range strings.Split(*teams, ",") {
			if t = strings.TrimSpace(t); t != "" {
				srv.CreateTeam(*org, t)
			}
		}
		fmt.Printf("org %s: App installation id %d\n", *org, id)
	}

	fmt.Printf("fake GitHub listening on %s (state in %s)\n", srv.URL, dir)
	fmt.Printf("  export GITHUB_API_URL=%s\n", srv.APIURL())
	fmt.Printf("  token:   GITHUB_TOKEN=%s (user %s)\n", *token, githubtest.DefaultUser)
	fmt.Printf("  app:     id %d, private key %s, permissions of %s\n", *appID, keyPath, manifestPath)
	fmt.Printf("  git:     %s/OWNER/REPO.git (basic auth x-access-token:TOKEN)\n", srv.URL)
	if *urlFile != "" {
		// Written last, atomically: once it exists, the org, teams and App are there too.
		tmp := *urlFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(srv.URL+"\n"), 0o644); err != nil {
			return fmt.Errorf("writing --url-file: %w", err)
		}
		if err := os.Rename(tmp, *urlFile); err != nil {
			return fmt.Errorf("writing --url-file: %w", err)
		}
	}

	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serving: %w", err)
		}
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = hs.Shutdown(shutdown)
	srv.Close()
	return err
}
