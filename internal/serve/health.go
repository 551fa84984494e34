package serve

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/webhook"
)

// HealthPath is where serve takes the health events of the clusters' notification-controllers
// (spec.rollout.health.provider: generic-hmac): HealthPath<cluster> for flux-system,
// HealthPath<cluster>/<namespace> for the cluster's workspace namespace.
const HealthPath = "/health/"

// StatusPoster posts a commit status (githubapi.CommitStatuses).
type StatusPoster interface {
	Post(ctx context.Context, owner, repo, sha, context, state, description string) error
}

// healthEvents serves HealthPath: it verifies each event against the keys of the endpoint its
// path names (app.HealthKeys, read per request so a rotated key applies at once) and records
// the verdict as the commit status a github Provider would post, on the cluster or workspace
// repo at the commit the event names. GitHub's status webhook then wakes the rollout as for a
// status Flux posted itself. Nothing of an unverified request reaches a log beyond its
// endpoint's names, which are DNS labels (bounded) once HealthKeys accepted them.
type healthEvents struct {
	keysDir string
	log     *slog.Logger
	service *atomic.Pointer[webhook.Service]
	poster  atomic.Pointer[StatusPoster]
}

func (h *healthEvents) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST a notification-controller event", http.StatusMethodNotAllowed)
		return
	}
	at, ok := healthEndpoint(r.URL.Path)
	if !ok {
		http.Error(w, "want "+HealthPath+"<cluster> or "+HealthPath+"<cluster>/<namespace>", http.StatusNotFound)
		return
	}
	keys, err := app.HealthKeys(h.keysDir, at)
	if errors.Is(err, app.ErrHealthUnknown) {
		http.Error(w, "unknown health endpoint", http.StatusNotFound)
		return
	}
	if err != nil {
		h.log.Error("health event: reading the endpoint's keys", "cluster", at.Cluster, "err", err)
		http.Error(w, "cannot read the endpoint's keys", http.StatusInternalServerError)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, app.MaxHealthEventBytes))
	if err != nil {
		http.Error(w, "the body is larger than an event", http.StatusRequestEntityTooLarge)
		return
	}
	ev, err := app.ParseHealthEvent(body, r.Header.Get(app.HealthSignatureHeader), keys, at)
	if err != nil {
		code := http.StatusBadRequest
		if errors.Is(err, app.ErrHealthSignature) {
			code = http.StatusUnauthorized
		}
		h.log.Warn("health event refused", "cluster", at.Cluster, "namespace", at.Namespace, "err", err) // the errors name no content
		http.Error(w, err.Error(), code)
		return
	}
	h.record(w, r.Context(), ev, at)
}

// record posts the verdict of a verified event, or says why nothing is recorded.
func (h *healthEvents) record(w http.ResponseWriter, ctx context.Context, ev app.HealthEvent, at app.HealthEndpoint) {
	svc, poster := h.service.Load(), h.poster.Load()
	var repo *app.ControlRepo
	if svc != nil {
		repo = svc.Reports().Control
	}
	if repo == nil || poster == nil {
		w.Header().Set("Retry-After", "30")
		http.Error(w, "fleetbot is starting: no control repo applied yet", http.StatusServiceUnavailable)
		return
	}
	rec, ok, why, err := app.HealthRecordOf(repo, ev, at)
	switch {
	case errors.Is(err, app.ErrHealthUnknown):
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	case !ok:
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, "nothing recorded: "+why+"\n")
		return
	}
	st := rec.Status
	if err := (*poster).Post(ctx, rec.Owner, rec.Repo, rec.Commit, st.Context, st.State, st.Description); err != nil {
		h.log.Error("health event: recording the commit status", "repo", rec.Owner+"/"+rec.Repo, "commit", rec.Commit, "err", err)
		http.Error(w, "cannot record the commit status; notification-controller retries", http.StatusBadGateway)
		return
	}
	h.log.Info("health event recorded", "repo", rec.Owner+"/"+rec.Repo, "commit", rec.Commit, "context", st.Context, "state", st.State)
	w.WriteHeader(http.StatusAccepted)
	_, _ = io.WriteString(w, "recorded "+st.State+" on "+rec.Commit+"\n")
}

// healthEndpoint reads the endpoint a path names: HealthPath<cluster>[/<namespace>].
func healthEndpoint(path string) (app.HealthEndpoint, bool) {
	rest, ok := strings.CutPrefix(path, HealthPath)
	if !ok || rest == "" {
		return app.HealthEndpoint{}, false
	}
	parts := strings.Split(rest, "/")
	switch len(parts) {
	case 1:
		return app.HealthEndpoint{Cluster: parts[0]}, true
	case 2:
		return app.HealthEndpoint{Cluster: parts[0], Namespace: parts[1]}, parts[1] != ""
	}
	return app.HealthEndpoint{}, false
}

// withHealth mounts HealthPath in front of next when a keys directory is configured.
func withHealth(cfg Config, next http.Handler, h *healthEvents) http.Handler {
	if cfg.HealthKeys == "" {
		return next
	}
	mux := http.NewServeMux()
	mux.Handle(HealthPath, h)
	mux.Handle("/", next)
	return mux
}
