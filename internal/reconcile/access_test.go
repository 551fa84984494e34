package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	gh "github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/forge/local"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/policy"
)

// accessHarness drives access scenarios on one forge: what an org admin
// does by hand in the GitHub UI (or to settings.json), and how to look at
// the result without going through fleetbot.
type accessHarness struct {
	// forge opens the forge as a new run would.
	forge func(t *testing.T) Forge
	// self is the login fleetbot acts as on this forge.
	self          string
	grant         func(t *testing.T, repo, team, role string) // role "" revokes
	collaborator  func(t *testing.T, repo, login, role string)
	unprotect     func(t *testing.T, repo string)
	dropRuleset   func(t *testing.T, repo string)
	archive       func(t *testing.T, repo string)
	createRepo    func(t *testing.T, repo string)
	humanCommit   func(t *testing.T, repo string, files map[string]string)
	teams         func(t *testing.T, repo string) map[string]string
	collaborators func(t *testing.T, repo string) map[string]string
	protected     func(t *testing.T, repo string) bool
	quiet         func(t *testing.T)
	wrote         func(t *testing.T) bool
}

// orgTeams are the teams of acme in the access scenarios: those the example
// control repo names, plus some nobody should have.
var orgTeams = []string{"platform", "payments-sre", "payments-devs", "search-sre", "search-devs", "intruders", "x1", "x2", "x3"}

func localAccessHarness(t *testing.T, teams []string) *accessHarness {
	requireGit(t)
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "acme"), 0o755))
	b, err := json.Marshal(map[string]any{"teams": teams})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "acme", local.OrgFile), b, 0o644))
	var f *local.Forge
	open := func(t *testing.T) *local.Forge {
		if f != nil {
			require.NoError(t, f.Close())
		}
		f = openForge(t, dir)
		return f
	}
	settings := func(t *testing.T, repo string, edit func(s map[string]any)) map[string]any {
		p := filepath.Join(dir, "acme", repo+".settings.json")
		s := map[string]any{}
		if b, err := os.ReadFile(p); err == nil {
			require.NoError(t, json.Unmarshal(b, &s))
		}
		if edit != nil {
			edit(s)
			b, err := json.MarshalIndent(s, "", "  ")
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(p, b, 0o644))
		}
		return s
	}
	roles := func(v any) map[string]string {
		out := map[string]string{}
		m, _ := v.(map[string]any)
		for k, r := range m {
			out[k] = r.(string)
		}
		return out
	}
	setRole := func(s map[string]any, key, name, role string) {
		m, _ := s[key].(map[string]any)
		if m == nil {
			m = map[string]any{}
		}
		if role == "" {
			delete(m, name)
		} else {
			m[name] = role
		}
		s[key] = m
	}
	var before map[string]string
	return &accessHarness{
		forge: func(t *testing.T) Forge { return open(t) },
		self:  local.CommitterName,
		grant: func(t *testing.T, repo, team, role string) {
			settings(t, repo, func(s map[string]any) { setRole(s, "teams", team, role) })
		},
		collaborator: func(t *testing.T, repo, login, role string) {
			settings(t, repo, func(s map[string]any) { setRole(s, "collaborators", login, role) })
		},
		unprotect: func(t *testing.T, repo string) {
			settings(t, repo, func(s map[string]any) { delete(s, "protection") })
		},
		dropRuleset: func(t *testing.T, repo string) {
			settings(t, repo, func(s map[string]any) { delete(s, "ruleset") })
		},
		archive: func(t *testing.T, repo string) {
			settings(t, repo, func(s map[string]any) { s["archived"] = true })
		},
		createRepo: func(t *testing.T, repo string) {
			wt := t.TempDir()
			for _, args := range [][]string{
				{"init", "-q", "--bare", "-b", "main", filepath.Join(dir, "acme", repo+".git")},
				{"-C", wt, "init", "-q", "-b", "main"},
				{"-C", wt, "-c", "user.name=Hu Man", "-c", "user.email=hu@example.com", "commit", "-q", "--allow-empty", "-m", "init"},
				{"-C", wt, "push", "-q", filepath.Join(dir, "acme", repo+".git"), "main"},
			} {
				out, err := exec.Command("git", args...).CombinedOutput()
				require.NoError(t, err, "git %v: %s", args, out)
			}
		},
		humanCommit: func(t *testing.T, repo string, files map[string]string) {
			humanPush(t, dir, repo, "main", func(wt string) {
				for p, c := range files {
					writeFile(t, wt, p, c)
				}
			})
		},
		teams: func(t *testing.T, repo string) map[string]string { return roles(settings(t, repo, nil)["teams"]) },
		collaborators: func(t *testing.T, repo string) map[string]string {
			return roles(settings(t, repo, nil)["collaborators"])
		},
		protected: func(t *testing.T, repo string) bool {
			p, ok := settings(t, repo, nil)["protection"].(map[string]any)
			return ok && p["requirePullRequest"] == true && p["requireCodeOwnerReviews"] == true && p["dismissStaleReviews"] == true
		},
		quiet: func(t *testing.T) { before = dirState(t, dir) },
		wrote: func(t *testing.T) bool { return fmt.Sprint(before) != fmt.Sprint(dirState(t, dir)) },
	}
}

func githubAccessHarness(t *testing.T, teams []string) *accessHarness {
	srv := githubtest.NewServer(t)
	srv.CreateOrg("acme")
	for _, team := range teams {
		srv.CreateTeam("acme", team)
	}
	human := srv.Client()
	ctx := context.Background()
	cacheDir := t.TempDir()
	return &accessHarness{
		forge: func(t *testing.T) Forge {
			c, err := ghforge.New(ctx, ghforge.Config{
				APIURL: srv.APIURL(), AppID: srv.AppID(), PrivateKey: srv.AppPrivateKeyPEM(), Owner: "acme",
				Budget: ghforge.BudgetConfig{PerMinute: 10000, PerHour: 100000, MinInterval: -1},
			})
			require.NoError(t, err)
			// Drift is what these tests are about: read access on every run.
			return ghforge.NewForge(c, ghforge.ForgeOptions{CacheDir: cacheDir, AccessMaxAge: -1})
		},
		self: "fleetbot[bot]",
		grant: func(t *testing.T, repo, team, role string) {
			if role == "" {
				_, err := human.Teams.RemoveTeamRepoBySlug(ctx, "acme", team, "acme", repo)
				require.NoError(t, err)
				return
			}
			srv.SetTeamRepoPermission("acme", team, "acme", repo, role)
		},
		collaborator: func(t *testing.T, repo, login, role string) { srv.SetCollaborator("acme", repo, login, role) },
		unprotect: func(t *testing.T, repo string) {
			_, err := human.Repositories.RemoveBranchProtection(ctx, "acme", repo, "main")
			require.NoError(t, err)
		},
		dropRuleset: func(t *testing.T, repo string) {
			rs, _, err := human.Repositories.GetAllRulesets(ctx, "acme", repo, false)
			require.NoError(t, err)
			for _, r := range rs {
				_, err := human.Repositories.DeleteRuleset(ctx, "acme", repo, r.GetID())
				require.NoError(t, err)
			}
		},
		archive: func(t *testing.T, repo string) {
			_, _, err := human.Repositories.Edit(ctx, "acme", repo, &gh.Repository{Archived: gh.Bool(true)})
			require.NoError(t, err)
		},
		createRepo: func(t *testing.T, repo string) {
			srv.CreateRepo("acme", repo, map[string]string{"README.md": "control\n"})
		},
		humanCommit: func(t *testing.T, repo string, files map[string]string) {
			srv.Commit("acme", repo, "main", "human edit", files)
		},
		teams: func(t *testing.T, repo string) map[string]string { return srv.TeamPermissions("acme", repo) },
		collaborators: func(t *testing.T, repo string) map[string]string {
			us, _, err := human.Repositories.ListCollaborators(ctx, "acme", repo, &gh.ListCollaboratorsOptions{Affiliation: "direct"})
			require.NoError(t, err)
			out := map[string]string{}
			for _, u := range us {
				out[u.GetLogin()] = string(policy.RolePull)
				for _, r := range []string{"push", "admin"} {
					if u.GetPermissions()[r] {
						out[u.GetLogin()] = r
					}
				}
			}
			return out
		},
		protected: func(t *testing.T, repo string) bool {
			p, _, err := human.Repositories.GetBranchProtection(ctx, "acme", repo, "main")
			if errors.Is(err, gh.ErrBranchNotProtected) {
				return false
			}
			require.NoError(t, err)
			r := p.GetRequiredPullRequestReviews()
			return r != nil && r.RequireCodeOwnerReviews && r.DismissStaleReviews && !p.GetAllowForcePushes().Enabled && !p.GetAllowDeletions().Enabled
		},
		quiet: func(t *testing.T) { srv.ResetLog() },
		wrote: func(t *testing.T) bool {
			for _, r := range srv.Requests() {
				// Minting an installation token is the client's, not a write to a repo.
				if r.Class != githubtest.Read && !strings.HasPrefix(r.Route, "POST /app/") {
					t.Logf("write: %s %s", r.Method, r.Path)
					return true
				}
			}
			return false
		},
	}
}

// bothForges runs fn once per forge, with acme holding teams.
func bothForges(t *testing.T, teams []string, fn func(t *testing.T, h *accessHarness)) {
	t.Run("local", func(t *testing.T) { fn(t, localAccessHarness(t, teams)) })
	t.Run("github", func(t *testing.T) { fn(t, githubAccessHarness(t, teams)) })
}

// accessRun loads and renders the (edited) example control repo and plans
// or applies it.
type accessRun struct {
	dir string
	h   *accessHarness
	// renderer renders every plan and apply of the run: warm, it rebuilds only the apps an
	// edit changed (a warm render equals a cold one: fanout's TestWarmRenderReusesFiles).
	renderer *fanout.Renderer
}

func (r accessRun) load(t *testing.T) (*control.Repo, []*fanout.Target) {
	t.Helper()
	repo, err := control.LoadDir(r.dir)
	require.NoError(t, err)
	targets, err := r.renderer.Render(repo)
	require.NoError(t, err)
	return repo, targets
}

func (r accessRun) plan(t *testing.T, opts Options) (*Report, error) {
	t.Helper()
	repo, targets := r.load(t)
	return Plan(context.Background(), r.h.forge(t), repo, targets, opts)
}

func (r accessRun) apply(t *testing.T, opts Options) (*Report, error) {
	t.Helper()
	repo, targets := r.load(t)
	return Apply(context.Background(), r.h.forge(t), repo, targets, opts)
}

func (r accessRun) mustApply(t *testing.T, opts Options) *Report {
	t.Helper()
	rep, err := r.apply(t, opts)
	require.NoError(t, err)
	return rep
}

func result(t *testing.T, rep *Report, repo string) Result {
	t.Helper()
	for _, r := range rep.Results {
		if r.Repo == "acme/"+repo {
			return r
		}
	}
	t.Fatalf("no result for %s in %v", repo, actions(rep))
	return Result{}
}

func drift(r Result) []string {
	if r.Access == nil {
		return nil
	}
	return r.Access.Drift
}

// TestAccessConvergesFromDrift: four kinds of hand-made drift, each in its
// own repo (each is one removal, within the default 25% cap), show in plan,
// plan writes nothing, and apply converges every repo to the matrix.
func TestAccessConvergesFromDrift(t *testing.T) {
	t.Parallel()
	bothForges(t, orgTeams, func(t *testing.T, h *accessHarness) {
		r := accessRun{dir: controlDir(t), h: h, renderer: fanout.NewRenderer(fanout.Options{})}
		r.mustApply(t, Options{})

		h.grant(t, "cluster-prod-eu-1", "payments-sre", "admin") // a hand-granted admin
		h.unprotect(t, "cluster-prod-eu-1")                      // protection switched off
		h.collaborator(t, "workspace-payments", "mallory", "push")
		h.grant(t, "cluster-edge-1", "intruders", "push")
		h.humanCommit(t, "workspace-search", map[string]string{".github/CODEOWNERS": "* @acme/search-devs\n"})

		h.quiet(t)
		rep, err := r.plan(t, Options{})
		require.NoError(t, err)
		assert.False(t, h.wrote(t), "plan writes nothing")
		assert.NoError(t, rep.Refused)

		prod := result(t, rep, "cluster-prod-eu-1")
		assert.True(t, prod.AccessChanged)
		assert.Equal(t, []string{"lower team payments-sre from admin to push", "protect: branch main is not protected"}, drift(prod))
		pay := result(t, rep, "workspace-payments")
		assert.Equal(t, []string{"remove direct collaborator mallory (push; access is granted through teams only)"}, drift(pay))
		edge := result(t, rep, "cluster-edge-1")
		assert.Equal(t, []string{"revoke team intruders (push, not in the persona matrix)"}, drift(edge))
		search := result(t, rep, "workspace-search")
		assert.False(t, search.AccessChanged, "CODEOWNERS is corrected by the PR, not by access")
		assert.Equal(t, []string{".github/CODEOWNERS on main differs from the persona matrix (changed): the PR rewrites it"}, drift(search))
		var text strings.Builder
		require.NoError(t, rep.WriteText(&text))
		assert.Contains(t, text.String(), "would lower team payments-sre from admin to push")
		assert.Contains(t, text.String(), "the PR rewrites it")

		rep = r.mustApply(t, Options{})
		assert.True(t, result(t, rep, "cluster-prod-eu-1").Access.Applied)
		assert.Equal(t, map[string]string{"platform": "admin", "payments-sre": "push", "payments-devs": "pull"}, h.teams(t, "cluster-prod-eu-1"))
		assert.True(t, h.protected(t, "cluster-prod-eu-1"))
		assert.Empty(t, h.collaborators(t, "workspace-payments"))
		assert.NotContains(t, h.teams(t, "cluster-edge-1"), "intruders")
		assert.NotZero(t, result(t, rep, "workspace-search").PR, "the CODEOWNERS edit is corrected by a PR")

		rep, err = r.plan(t, Options{})
		require.NoError(t, err)
		for _, res := range rep.Results {
			assert.False(t, res.AccessChanged, "%s converged: %v", res.Repo, drift(res))
			assert.Empty(t, res.CodeownersErrors, res.Repo)
		}
	})
}

// TestAccessAdditive: additive mode grants what is missing and keeps
// everything else, saying so.
func TestAccessAdditive(t *testing.T) {
	t.Parallel()
	bothForges(t, orgTeams, func(t *testing.T, h *accessHarness) {
		r := accessRun{dir: controlDir(t), h: h, renderer: fanout.NewRenderer(fanout.Options{})}
		r.mustApply(t, Options{})
		edit(t, r.dir, "platform.yaml", "  defaultBranch: main\n", "  defaultBranch: main\n  access: {mode: additive}\n")

		h.grant(t, "workspace-payments", "payments-devs", "") // a missing grant
		h.grant(t, "workspace-payments", "intruders", "admin")
		h.collaborator(t, "workspace-payments", "mallory", "admin")
		h.grant(t, "workspace-payments", "x1", "pull")
		h.grant(t, "workspace-payments", "x2", "pull")

		rep := r.mustApply(t, Options{})
		res := result(t, rep, "workspace-payments")
		assert.NoError(t, rep.Refused, "additive mode removes nothing, so nothing to refuse")
		assert.Equal(t, []string{
			"grant team payments-devs push",
			"kept: team intruders: keeps admin although not desired (additive mode)",
			"kept: team x1: keeps pull although not desired (additive mode)",
			"kept: team x2: keeps pull although not desired (additive mode)",
			"kept: collaborator mallory: keeps admin (additive mode)",
		}, drift(res))
		assert.Equal(t, map[string]string{"platform": "admin", "payments-devs": "push", "intruders": "admin", "x1": "pull", "x2": "pull"},
			h.teams(t, "workspace-payments"))
		assert.Equal(t, map[string]string{"mallory": "admin"}, h.collaborators(t, "workspace-payments"))
	})
}

// TestAccessRemovalGuard: a repo that would lose more than 25% of its
// grants refuses the whole run (nothing written anywhere), plan says so,
// and --allow-access-removals lets it through.
func TestAccessRemovalGuard(t *testing.T) {
	t.Parallel()
	bothForges(t, orgTeams, func(t *testing.T, h *accessHarness) {
		r := accessRun{dir: controlDir(t), h: h, renderer: fanout.NewRenderer(fanout.Options{})}
		r.mustApply(t, Options{})
		for _, team := range []string{"x1", "x2", "x3"} {
			h.grant(t, "cluster-prod-eu-1", team, "push")
		}
		h.grant(t, "cluster-edge-1", "intruders", "push") // fine alone, but the run is refused

		rep, err := r.plan(t, Options{})
		require.NoError(t, err, "plan reports a refusal, it does not fail")
		require.ErrorIs(t, rep.Refused, ErrTooManyAccessRemovals)
		assert.Contains(t, rep.Refused.Error(), "acme/cluster-prod-eu-1: 3 of 6 grants would be removed, the limit is 2")
		assert.Equal(t, 1, strings.Count(rep.Refused.Error(), policy.ErrTooManyRemovals.Error()), "the refusal says it once: %v", rep.Refused)
		assert.Contains(t, result(t, rep, "cluster-prod-eu-1").Access.Refused, "3 of 6 grants")

		h.quiet(t)
		_, err = r.apply(t, Options{})
		require.ErrorIs(t, err, ErrTooManyAccessRemovals)
		assert.False(t, h.wrote(t), "a refused run writes nothing")
		assert.Contains(t, h.teams(t, "cluster-edge-1"), "intruders", "not even the repos within the cap")

		rep = r.mustApply(t, Options{AllowAccessRemovals: true})
		assert.Equal(t, map[string]string{"platform": "admin", "payments-sre": "push", "payments-devs": "pull"}, h.teams(t, "cluster-prod-eu-1"))
		assert.NotContains(t, h.teams(t, "cluster-edge-1"), "intruders")
		assert.NoError(t, rep.Refused)
	})
}

// TestAccessNeverRemovesPlatformOrBot: the platform admin team downgraded
// by hand is raised back, fleetbot's own login stays a collaborator, and a
// plan that would drop the platform team (a broken control repo naming
// another one) keeps it.
func TestAccessNeverRemovesPlatformOrBot(t *testing.T) {
	t.Parallel()
	bothForges(t, orgTeams, func(t *testing.T, h *accessHarness) {
		r := accessRun{dir: controlDir(t), h: h, renderer: fanout.NewRenderer(fanout.Options{})}
		r.mustApply(t, Options{})
		h.grant(t, "cluster-staging-eu-1", "platform", "pull")
		h.collaborator(t, "cluster-staging-eu-1", h.self, "admin")
		h.collaborator(t, "cluster-staging-eu-1", "mallory", "admin")

		rep := r.mustApply(t, Options{AllowAccessRemovals: true})
		res := result(t, rep, "cluster-staging-eu-1")
		assert.Contains(t, drift(res), "raise team platform from pull to admin")
		assert.Contains(t, drift(res), "kept: collaborator "+h.self+": keeps admin (protected)")
		assert.Equal(t, "admin", h.teams(t, "cluster-staging-eu-1")["platform"])
		assert.Equal(t, map[string]string{h.self: "admin"}, h.collaborators(t, "cluster-staging-eu-1"))

		// A second platform admin team is granted admin everywhere; the first
		// keeps admin and the bot stays.
		edit(t, r.dir, "platform.yaml", "admins: [platform]", "admins: [platform, x1]")
		r.mustApply(t, Options{AllowAccessRemovals: true})
		assert.Equal(t, "admin", h.teams(t, "cluster-staging-eu-1")["x1"])
		assert.Equal(t, "admin", h.teams(t, "cluster-staging-eu-1")["platform"])
		assert.Equal(t, map[string]string{h.self: "admin"}, h.collaborators(t, "cluster-staging-eu-1"))
	})
}

// TestAccessArchivedSkipped: an archived repo is neither written nor
// failed: it is reported as skipped.
func TestAccessArchivedSkipped(t *testing.T) {
	t.Parallel()
	bothForges(t, orgTeams, func(t *testing.T, h *accessHarness) {
		r := accessRun{dir: controlDir(t), h: h, renderer: fanout.NewRenderer(fanout.Options{})}
		r.mustApply(t, Options{})
		h.grant(t, "cluster-edge-1", "intruders", "admin")
		h.archive(t, "cluster-edge-1")
		edit(t, r.dir, "clusters/edge-1.yaml", "192.168.50.0/28", "192.168.60.0/28")

		rep, err := r.plan(t, Options{})
		require.NoError(t, err)
		res := result(t, rep, "cluster-edge-1")
		assert.Equal(t, SkippedArchived, res.Skipped)
		assert.False(t, res.Changed())
		assert.Equal(t, "acme/cluster-edge-1: skipped (archived)", res.Line())

		h.quiet(t)
		rep = r.mustApply(t, Options{})
		assert.Empty(t, rep.Failed())
		assert.False(t, h.wrote(t), "nothing is written to an archived repo")
		assert.Equal(t, "admin", h.teams(t, "cluster-edge-1")["intruders"], "its drift is left alone")
		var text strings.Builder
		require.NoError(t, rep.WriteText(&text))
		assert.Contains(t, text.String(), "1 skipped")
	})
}

// TestAccessMissingTeam: a team the control repo names that the org lacks
// is a plan error at the file and line naming it; nothing is written.
func TestAccessMissingTeam(t *testing.T) {
	t.Parallel()
	var teams []string
	for _, team := range orgTeams {
		if team != "payments-sre" {
			teams = append(teams, team)
		}
	}
	bothForges(t, teams, func(t *testing.T, h *accessHarness) {
		r := accessRun{dir: controlDir(t), h: h, renderer: fanout.NewRenderer(fanout.Options{})}
		h.quiet(t)
		rep, err := r.plan(t, Options{})
		var is control.Issues
		require.ErrorAs(t, err, &is)
		require.Len(t, is, 2, "every place that names the team")
		assert.Equal(t, `clusters/prod-eu-1.yaml:8: team "payments-sre" does not exist in org acme`, is[0].Pos.String()+": "+is[0].Message)
		assert.Equal(t, `clusters/prod-us-1.yaml:8: team "payments-sre" does not exist in org acme`, is[1].Pos.String()+": "+is[1].Message)
		require.NotNil(t, rep)
		assert.Equal(t, is, rep.Issues)
		_, err = r.apply(t, Options{})
		require.ErrorAs(t, err, &is)
		assert.False(t, h.wrote(t), "nothing is written anywhere")
	})
}

// TestAccessControlRepo: spec.repos.control guards the control repo:
// platform admins only, protected default branch, extras removed.
func TestAccessControlRepo(t *testing.T) {
	t.Parallel()
	bothForges(t, orgTeams, func(t *testing.T, h *accessHarness) {
		r := accessRun{dir: controlDir(t), h: h, renderer: fanout.NewRenderer(fanout.Options{})}
		edit(t, r.dir, "platform.yaml", "    visibility: private\n", "    visibility: private\n    control: fleet-control\n")
		h.createRepo(t, "fleet-control")
		h.humanCommit(t, "fleet-control", map[string]string{"platform.yaml": "x\n"})
		h.grant(t, "fleet-control", "payments-devs", "push")
		rep := r.mustApply(t, Options{})
		res := result(t, rep, "fleet-control")
		assert.Equal(t, KindControl, res.Kind)
		assert.Equal(t, []string{"grant team platform admin", "revoke team payments-devs (push, not in the persona matrix)", "protect: branch main is not protected"}, drift(res))
		assert.Equal(t, map[string]string{"platform": "admin"}, h.teams(t, "fleet-control"))
		assert.True(t, h.protected(t, "fleet-control"))
	})
}

// TestAccessCodeownersErrors: a team CODEOWNERS names that lost its write
// access makes CODEOWNERS invalid for that path (GitHub silently ignores
// such an owner). Plan shows GitHub's error (the local forge's offline
// check on the local forge); apply restores the grant and the error is gone.
func TestAccessCodeownersErrors(t *testing.T) {
	t.Parallel()
	bothForges(t, orgTeams, func(t *testing.T, h *accessHarness) {
		r := accessRun{dir: controlDir(t), h: h, renderer: fanout.NewRenderer(fanout.Options{})}
		rep := r.mustApply(t, Options{})
		assert.Empty(t, result(t, rep, "cluster-prod-eu-1").CodeownersErrors, "checked once the bootstrap landed: clean")
		h.grant(t, "cluster-prod-eu-1", "payments-sre", "")

		rep, err := r.plan(t, Options{})
		require.NoError(t, err)
		res := result(t, rep, "cluster-prod-eu-1")
		assert.Equal(t, []string{"grant team payments-sre push"}, drift(res))
		// The cluster admins own two lines: /apps/ and Flux's own kustomization.
		require.Len(t, res.CodeownersErrors, 2, "%v", res.CodeownersErrors)
		for i, e := range res.CodeownersErrors {
			assert.Equal(t, ".github/CODEOWNERS", e.Path)
			assert.Equal(t, "Unknown owner", e.Kind)
			assert.Contains(t, e.Message, "@acme/payments-sre")
			assert.Equal(t, 5+i, e.Line, "the /apps/ and /flux/flux-system/kustomization.yaml lines, after the three header comments and *")
		}
		var md strings.Builder
		require.NoError(t, rep.WriteMarkdown(&md))
		assert.Contains(t, md.String(), "CODEOWNERS error: .github/CODEOWNERS:5: Unknown owner")

		rep = r.mustApply(t, Options{})
		assert.Empty(t, result(t, rep, "cluster-prod-eu-1").CodeownersErrors, "re-checked after the grant")
		rep, err = r.plan(t, Options{})
		require.NoError(t, err)
		assert.Empty(t, result(t, rep, "cluster-prod-eu-1").CodeownersErrors)
	})
}

// TestBranchRulesConvergeAsRulesets: branch rules declared in platform.yaml are enforced as a
// ruleset on every repo (not a classic protection), on both forges; a ruleset deleted by hand
// is drift that plan shows, in words, and apply repairs.
func TestBranchRulesConvergeAsRulesets(t *testing.T) {
	t.Parallel()
	bothForges(t, orgTeams, func(t *testing.T, h *accessHarness) {
		dir := controlDir(t)
		edit(t, dir, "platform.yaml", "  admins: [platform]\n", "  admins: [platform]\n  access:\n    branchRules:\n      requiredApprovals: 2\n      bypass:\n        - role: admin\n")
		r := accessRun{dir: dir, h: h, renderer: fanout.NewRenderer(fanout.Options{})}
		r.mustApply(t, Options{})
		assert.False(t, h.protected(t, "cluster-prod-eu-1"), "the ruleset enforces the rules, not a classic protection")
		rep, err := r.plan(t, Options{})
		require.NoError(t, err)
		for _, res := range rep.Results {
			assert.False(t, res.AccessChanged, "%s converged: %v", res.Repo, drift(res))
		}

		h.dropRuleset(t, "cluster-prod-eu-1")
		h.quiet(t)
		rep, err = r.plan(t, Options{})
		require.NoError(t, err)
		assert.False(t, h.wrote(t), "plan writes nothing")
		assert.Equal(t, []string{"ruleset: no repository ruleset fleetbot enforces branch main"}, drift(result(t, rep, "cluster-prod-eu-1")))
		var text strings.Builder
		require.NoError(t, rep.WriteText(&text))
		assert.Contains(t, text.String(), "no repository ruleset fleetbot enforces branch main")

		r.mustApply(t, Options{})
		rep, err = r.plan(t, Options{})
		require.NoError(t, err)
		for _, res := range rep.Results {
			assert.False(t, res.AccessChanged, "%s converged: %v", res.Repo, drift(res))
		}
	})
}
