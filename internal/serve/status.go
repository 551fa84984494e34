package serve

import (
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/webhook"
)

// withStatusPages mounts the /status pages in front of the service's routes when enabled. The
// pages read the service's retained reports only: loading them costs no GitHub request.
func withStatusPages(cfg Config, next http.Handler, svc *atomic.Pointer[webhook.Service]) (http.Handler, error) {
	if !cfg.Status.Enabled {
		return next, nil
	}
	web := strings.TrimSuffix(app.ResolveGitURL(cfg.App.GitURL, app.ForgeGitHub, cfg.App.GitHub.APIURL), "/")
	pages, err := app.StatusPages(app.StatusPagesConfig{
		Token: cfg.Status.Token, InsecureNoAuth: cfg.Status.Insecure, GroupBy: cfg.Status.GroupBy,
		RepoURL: func(full string) string { return web + "/" + full },
		Reports: func() app.Reports {
			if s := svc.Load(); s != nil {
				return s.Reports()
			}
			return app.Reports{}
		},
		Run: func() *app.StatusRun {
			if s := svc.Load(); s != nil {
				return s.StatusRun()
			}
			return nil
		},
	})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/status", pages)
	mux.Handle("/status/", pages)
	mux.Handle("/", next)
	return mux, nil
}
