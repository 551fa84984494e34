package main

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
)

// githubFlags configure --forge github. Every credential can come from the
// environment, where CI systems keep them; a flag wins over its variable.
type githubFlags struct {
	apiURL     string
	appID      string
	appKeyFile string
	perMinute  int
	perHour    int
	maxWait    time.Duration
	interval   time.Duration
	cacheDir   string
	transport  string
}

// register adds the GitHub flags to fs.
func (g *githubFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&g.apiURL, "github-url", "", "GitHub REST API URL, for GitHub Enterprise: https://HOST/api/v3/ (env GITHUB_API_URL; default https://api.github.com/)")
	fs.StringVar(&g.appID, "app-id", "", "GitHub App id (env FLEETBOT_APP_ID); with --app-key, fleetbot acts as the App's installation on the platform owner")
	fs.StringVar(&g.appKeyFile, "app-key", "", "PEM file with the GitHub App private key (env FLEETBOT_APP_KEY_FILE, or the PEM itself in FLEETBOT_APP_KEY)")
	minIntVar(fs, &g.perMinute, "content-per-minute", ghforge.DefaultPerMinute, 1, "content-creating GitHub requests allowed per rolling minute")
	minIntVar(fs, &g.perHour, "content-per-hour", ghforge.DefaultPerHour, 1, "content-creating GitHub requests allowed per rolling hour")
	positiveDurationVar(fs, &g.maxWait, "max-wait", ghforge.DefaultMaxWait, "longest wait for a GitHub limit; a repo whose writes would wait longer is deferred to the next run")
	fs.DurationVar(&g.interval, "mutation-interval", ghforge.DefaultMinInterval, "least time between two GitHub mutations of the installation (GitHub's guidance: 1s; 0: none)")
	choiceVar(fs, &g.transport, "content-transport", string(ghforge.DefaultContentTransport),
		[]string{string(ghforge.ContentTransportAPI), string(ghforge.ContentTransportGit)},
		"how commits reach GitHub: the Git Data API, or one git push per commit over HTTPS with the installation token (the API as fallback; docs/github.md, \"Content transport\")")
	fs.StringVar(&g.cacheDir, "github-cache", "", `snapshot cache directory (default: the user cache dir; "off" keeps it in memory)`)
}

// budget is the write budget the flags ask for.
func (g *githubFlags) budget() ghforge.BudgetConfig {
	b := ghforge.BudgetConfig{PerMinute: g.perMinute, PerHour: g.perHour, MaxWait: g.maxWait, MinInterval: g.interval}
	if g.interval <= 0 {
		b.MinInterval = -1 // none
	}
	return b
}

// config resolves the credential flags and environment into a client configuration for
// the API at apiURL; app.Config.ClientConfig sets owner and mode per client. It never logs
// or echoes a credential.
func (g *githubFlags) config(apiURL string) (ghforge.Config, error) {
	cfg := ghforge.Config{APIURL: apiURL, Budget: g.budget()}
	appID := firstNonEmpty(g.appID, os.Getenv("FLEETBOT_APP_ID"))
	keyFile := firstNonEmpty(g.appKeyFile, os.Getenv("FLEETBOT_APP_KEY_FILE"))
	key := os.Getenv("FLEETBOT_APP_KEY")
	token := os.Getenv("GITHUB_TOKEN")
	switch {
	case appID != "":
		id, err := strconv.ParseInt(appID, 10, 64)
		if err != nil || id <= 0 {
			return cfg, fmt.Errorf("--app-id %q: want the numeric GitHub App id", appID)
		}
		cfg.AppID = id
		switch {
		case keyFile != "":
			b, err := os.ReadFile(keyFile)
			if err != nil {
				return cfg, fmt.Errorf("reading the GitHub App private key: %w", err)
			}
			cfg.PrivateKey = b
		case key != "":
			cfg.PrivateKey = []byte(key)
		default:
			return cfg, errors.New("--app-id needs the App's private key: --app-key FILE, FLEETBOT_APP_KEY_FILE or FLEETBOT_APP_KEY")
		}
	case token != "":
		cfg.Token = token
	default:
		return cfg, errors.New("--forge github needs credentials: a GitHub App (--app-id and --app-key, or FLEETBOT_APP_ID and FLEETBOT_APP_KEY_FILE) or a token in GITHUB_TOKEN")
	}
	return cfg, nil
}

// cache returns the snapshot cache directory for apiURL, "" for none.
func (g *githubFlags) cache(apiURL string) string {
	switch g.cacheDir {
	case "off", "none":
		return ""
	case "":
		base, err := os.UserCacheDir()
		if err != nil {
			return ""
		}
		host := "api.github.com"
		if u, err := url.Parse(apiURL); err == nil && u.Host != "" {
			host = u.Host
		}
		return filepath.Join(base, "fleetbot", "github", strings.ReplaceAll(host, ":", "_"))
	}
	return g.cacheDir
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
