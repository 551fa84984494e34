package serve

import (
	"context"
	"fmt"
	"strings"

	"github.com/fleetbot-io/fleetbot/internal/app"
	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/webhook"
)

// tenantPulls is the resync's reader of the workspace and cluster repos' open pull requests and
// of the tenant check runs on their heads (webhook.TenantPulls), through the read-only forge of
// each owner's installation: GraphQL, 100 repos or heads a query.
type tenantPulls struct {
	forges *app.Installations
	// check is the tenant check's name; appID the App whose runs count (0: any).
	check string
	appID int64
}

// pullHeadReader is what tenantPulls needs of a forge (ghforge.Forge).
type pullHeadReader interface {
	OpenPullHeads(ctx context.Context, owner string, repos []string) ([]ghforge.PullHead, error)
	LatestCheckRuns(ctx context.Context, owner string, heads []ghforge.PullHead, name string, appID int64) (map[ghforge.PullHead]ghforge.CheckRunState, error)
}

func (t tenantPulls) reader(ctx context.Context, owner string) (pullHeadReader, error) {
	f, err := t.forges.Forge(ctx, owner, app.ForgePlan)
	if err != nil {
		return nil, err
	}
	r, ok := f.(pullHeadReader)
	if !ok {
		return nil, fmt.Errorf("the forge of %s (%T) cannot list pull request heads", owner, f)
	}
	return r, nil
}

// OpenPullRequests implements webhook.TenantPulls.
func (t tenantPulls) OpenPullRequests(ctx context.Context, owner string, repos []string) ([]webhook.TenantPull, error) {
	r, err := t.reader(ctx, owner)
	if err != nil {
		return nil, err
	}
	heads, err := r.OpenPullHeads(ctx, owner, repos)
	out := make([]webhook.TenantPull, 0, len(heads))
	for _, h := range heads {
		out = append(out, webhook.TenantPull{Repo: owner + "/" + h.Repo, Number: h.Number, Head: h.Head})
	}
	return out, err
}

// LatestChecks implements webhook.TenantPulls.
func (t tenantPulls) LatestChecks(ctx context.Context, owner string, pulls []webhook.TenantPull) (map[webhook.TenantPull]webhook.CheckState, error) {
	r, err := t.reader(ctx, owner)
	if err != nil {
		return nil, err
	}
	heads := make([]ghforge.PullHead, 0, len(pulls))
	of := make(map[ghforge.PullHead]webhook.TenantPull, len(pulls))
	for _, p := range pulls {
		_, name, _ := strings.Cut(p.Repo, "/")
		h := ghforge.PullHead{Repo: name, Number: p.Number, Head: p.Head}
		heads = append(heads, h)
		of[h] = p
	}
	runs, err := r.LatestCheckRuns(ctx, owner, heads, t.check, t.appID)
	out := make(map[webhook.TenantPull]webhook.CheckState, len(runs))
	for h, st := range runs {
		out[of[h]] = webhook.CheckState{ID: st.ID, Status: st.Status, StartedAt: st.StartedAt}
	}
	return out, err
}
