package webhook

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/checkrun"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// tenant checks a pull request head of a workspace or cluster repo and reports it as the tenant
// check run its protection requires: the repo is one of the fleet's at the control repo's head
// (a repo fleetbot does not manage is left alone: no check run), its files at the head are read
// through the API and checked offline as check workspace or check cluster does. Whatever goes
// wrong once the check run exists becomes its conclusion: failure, never neutral (GitHub counts
// a neutral required check as passed), or cancelled when serve stops.
func (s *Service) tenant(ctx context.Context, j Job) error {
	if s.cfg.Tenants == nil || s.cfg.TenantCheck.Context == "" {
		return errors.New("tenant check job: no tenant check configured")
	}
	e, err := s.headEntry(ctx)
	if err != nil {
		return fmt.Errorf("tenant check of %s@%s: %w", j.Repo, report.ShortSHA(j.SHA), err)
	}
	log := s.log.With("delivery", j.Delivery, "repo", j.Repo, "pr", j.PR, "sha", report.ShortSHA(j.SHA))
	t, ok := e.fleet.Tenant(j.Repo)
	if !ok {
		log.Debug("tenant check skipped: not a workspace or cluster repo of the fleet", "source", report.ShortSHA(e.sha))
		return nil
	}
	s.mu.Lock()
	granted, known := s.granted[strings.ToLower(e.fleet.Owner())]
	s.mu.Unlock()
	if known && !granted {
		log.Warn("tenant check skipped: the App's installation lacks checks: write", "owner", e.fleet.Owner())
		return nil
	}
	// A run a resync found stuck in_progress (its process died) is completed by this job, so
	// no run of the name is left spinning; otherwise the job starts its own.
	id := j.CheckRun
	if id == 0 {
		if id, err = s.cfg.Tenants.Start(ctx, j.Repo, j.SHA); err != nil {
			return err
		}
	}
	res := s.tenantResult(ctx, j, t)
	fctx := ctx
	if ctx.Err() != nil {
		res = checkrun.Result{Conclusion: checkrun.ConclusionCancelled, Title: "fleetbot stopped before finishing the check",
			Summary: "fleetbot shut down during this check. Re-run it."}
		var cancel context.CancelFunc
		fctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
	}
	log.Info("tenant check run", "kind", t.Kind, "name", t.Name, "conclusion", res.Conclusion, "problems", len(res.Annotations))
	return s.cfg.Tenants.Finish(fctx, j.Repo, id, res)
}

// tenantResult reads the repo at the job's commit and checks it as t.
func (s *Service) tenantResult(ctx context.Context, j Job, t app.Tenant) checkrun.Result {
	files, err := s.cfg.Tenants.Files(ctx, j.Repo, j.SHA, t.Rendered)
	if err != nil {
		return checkrun.Result{Conclusion: checkrun.ConclusionFailure, Title: "fleetbot could not read this commit",
			Summary: "fleetbot could not read " + "`" + j.Repo + "` at `" + report.ShortSHA(j.SHA) + "`, so it could not check it; " +
				"a pull request merges only once it has. Re-run the check; if it fails again, the reason is:\n\n```\n" + err.Error() + "\n```\n"}
	}
	entries, problems := app.CheckTenant(t, files)
	return tenantCheckResult(t, j.SHA, entries, problems)
}

// tenantCheckResult turns a tenant check into a check result: failure with each problem as an
// annotation on its file and line when there are problems, success otherwise.
func tenantCheckResult(t app.Tenant, sha string, entries []string, problems []report.Problem) checkrun.Result {
	what, cmd := "cluster repo of cluster "+t.Name, "fleetbot check cluster --dir ."
	if t.Kind == app.TenantWorkspace {
		what = fmt.Sprintf("workspace repo of workspace %s (namespace %s)", t.Name, t.Namespace)
		cmd = fmt.Sprintf("fleetbot check workspace --dir . --workspace %s --namespace %s", t.Name, t.Namespace)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "fleetbot rendered the %s at `%s` offline, as Flux will on the cluster, with the rules of `%s`.\n\n",
		what, report.ShortSHA(sha), cmd)
	res := checkrun.Result{Conclusion: checkrun.ConclusionSuccess}
	switch {
	case len(entries) == 0:
		res.Title = "nothing to render"
		dir := "apps/kustomization.yaml"
		if t.Kind == app.TenantWorkspace {
			dir = "clusters/<cluster>/kustomization.yaml"
		}
		fmt.Fprintf(&b, "The commit has no `%s`: Flux applies nothing from it.\n", dir)
	case len(problems) == 0:
		res.Title = fmt.Sprintf("%d kustomization(s) render cleanly", len(entries))
		fmt.Fprintf(&b, "✅ %s: `%s`\n", res.Title, strings.Join(entries, "`, `"))
	default:
		res.Conclusion = checkrun.ConclusionFailure
		res.Title = fmt.Sprintf("%d problem(s) in %d kustomization(s)", len(problems), len(entries))
		fmt.Fprintf(&b, "❌ %s; this pull request cannot merge until they are fixed. Run `%s` in a checkout to see them locally.\n\n", res.Title, cmd)
		for _, p := range problems {
			fmt.Fprintf(&b, "- `%s`\n", strings.NewReplacer("`", "'", "\n", " ").Replace(p.String()))
			if p.Hint != "" {
				fmt.Fprintf(&b, "  hint: %s\n", p.Hint)
			}
		}
		res.Annotations = tenantAnnotations(problems)
	}
	res.Summary = b.String()
	return res
}

// tenantAnnotations are the first checkrun.MaxTenantAnnotations problems as annotations.
func tenantAnnotations(problems []report.Problem) []checkrun.Annotation {
	out := make([]checkrun.Annotation, 0, min(len(problems), checkrun.MaxTenantAnnotations))
	for _, p := range problems[:min(len(problems), checkrun.MaxTenantAnnotations)] {
		msg := p.Message
		if p.Object != "" {
			msg = p.Object + ": " + msg
		}
		if p.Hint != "" {
			msg += "\nhint: " + p.Hint
		}
		out = append(out, checkrun.Annotation{Path: p.File, Line: p.Line, Level: "failure", Message: msg, Title: "fleetbot tenant check"})
	}
	return out
}

// requireTenantCheck makes fl's workspace and cluster repos require the tenant check, when one
// is configured and the App may write check runs on fl's owner.
func (s *Service) requireTenantCheck(ctx context.Context, fl *app.Fleet) error {
	if s.cfg.TenantCheck.Context == "" {
		return nil
	}
	owner := strings.ToLower(fl.Owner())
	s.mu.Lock()
	ok, known := s.granted[owner]
	s.mu.Unlock()
	if !known {
		var err error
		if ok, err = s.canCheck(ctx, owner); err != nil {
			return err
		}
		s.mu.Lock()
		s.granted[owner] = ok
		s.mu.Unlock()
	}
	if ok {
		fl.RequireCheck(s.cfg.TenantCheck)
	}
	return nil
}

// canCheck asks whether the App may write check runs on owner's repos, and says so when not.
func (s *Service) canCheck(ctx context.Context, owner string) (bool, error) {
	if s.cfg.CanCheck == nil {
		return true, nil
	}
	ok, err := s.cfg.CanCheck(ctx, owner)
	if err != nil {
		return false, fmt.Errorf("asking whether the App may write check runs on %s: %w", owner, err)
	}
	if !ok {
		s.log.Warn("the App's installation lacks checks: write: the tenant check is neither posted nor required on its repos; "+
			"accept the permission (app.yml lists it) and fleetbot requires it at the next resync",
			"owner", owner, "check", s.cfg.TenantCheck.Context)
	}
	return ok, nil
}

// regrant asks again, for every owner asked before, whether the App may write check runs; when
// an answer changed, the fleets kept (rendered with the old answer) are dropped.
func (s *Service) regrant(ctx context.Context) error {
	if s.cfg.TenantCheck.Context == "" || s.cfg.CanCheck == nil {
		return nil
	}
	s.mu.Lock()
	owners := make([]string, 0, len(s.granted))
	for o := range s.granted {
		owners = append(owners, o)
	}
	s.mu.Unlock()
	for _, o := range owners {
		ok, err := s.canCheck(ctx, o)
		if err != nil {
			return err
		}
		s.mu.Lock()
		if s.granted[o] != ok {
			s.granted[o], s.fleets = ok, nil
		}
		s.mu.Unlock()
	}
	return nil
}
