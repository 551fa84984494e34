package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/report"
	"github.com/fleetbot-io/fleetbot/internal/workcopy"
)

// exitNotAllowed is check control --strict's status for a change the
// author's teams may not make alone.
const exitNotAllowed = 3

func (a *frontend) checkCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Review-time checks: a control-repo change (check control), a workspace or cluster repo (check workspace, check cluster)",
		Example: `  fleetbot check control --control . --base origin/main --head HEAD --author octocat --author-teams payments-devs
  fleetbot check workspace --dir . --workspace payments
  fleetbot check cluster --dir .`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(a.checkControlCommand(), a.checkWorkspaceCommand(), a.checkClusterCommand())
	return cmd
}

// checkControlLong is the help text of checkControl.
const checkControlLong = `check control reads two commits of the control repo clone at --control (no
checkout: straight from git objects), validates the head, renders both and
reports which target repos would change (files, team roles) and which personas
the change reaches. It then judges every changed path against the persona
rules, with the admins of the base:

  platform admins        may change anything;
  workspace admins of W  may change only spec.apps of workspaces/W's file;
  code owners of a file  the teams the control repo's CODEOWNERS (base) gives
  under clusters/        a cluster file may add or change it, unless the change
                         sets or changes spec.provision.deletionPolicy;
  anyone else            needs a platform admin's review (cluster admins
                         may not change their own cluster definition).

The author's teams come from --author-teams, or with --forge github from
GitHub (GET /orgs/{org}/teams/{team}/memberships/{author}). Exit status: 1 when
the head does not validate; otherwise 0, or with --strict 3 when the change
needs a platform admin's review.`

func (a *frontend) checkControlCommand() *cobra.Command {
	var (
		base, head, author, format string
		authorTeams                []string
		strict                     bool
	)
	cmd := &cobra.Command{
		Use:   "control --base REF --head REF [--author LOGIN]",
		Short: "Review a control-repo change: validity, the target repos and personas it reaches, and whether its author may make it",
		Long:  checkControlLong,
		Example: `  # offline: the author's teams given
  fleetbot check control --control . --base origin/main --head HEAD --author octocat --author-teams payments-devs
  # the teams looked up on GitHub; exit 3 when a platform admin must review
  fleetbot check control --control . --base origin/main --head HEAD --author octocat --forge github --strict -o markdown`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if base == "" || head == "" {
				return errors.New("check control needs --base REF and --head REF")
			}
			repo, err := workcopy.Open(a.control)
			if err != nil {
				return fmt.Errorf("--control %s is not a git clone of the control repo: %w", a.control, err)
			}
			baseFS, baseRev, err := workcopy.TreeFS(repo, base)
			if err != nil {
				return err
			}
			headFS, headRev, err := workcopy.TreeFS(repo, head)
			if err != nil {
				return err
			}
			// The control repo may be a directory of a larger repository
			// (platform/fleet/ in a monorepo): review that directory's tree.
			if baseFS, headFS, err = workcopy.SubTrees(repo, a.control, baseFS, headFS); err != nil {
				return err
			}
			in := app.ControlChange{Base: baseFS, Head: headFS, BaseRev: baseRev, HeadRev: headRev, Author: author}
			switch {
			case cmd.Flags().Changed("author-teams"):
				in.Member = memberOf(authorTeams)
			case a.forge == "github" && author != "":
				member, err := a.githubMember(cmd, baseFS, author)
				if err != nil {
					return err
				}
				in.Member = member
			}
			rep, err := untilDone(cmd.Context(), "check control", func() (*app.ControlReview, error) { return a.base(nil).CheckControl(in) })
			if err != nil {
				return err
			}
			if err := writeReview(a.stdout, format, rep); err != nil {
				return err
			}
			switch {
			case !rep.Valid():
				return exitCode(report.ClassInvalidInput.ExitCode())
			case strict && !rep.Allowed():
				return exitCode(exitNotAllowed)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&base, "base", "", "the control repo commit the change is based on (branch, tag or SHA)")
	f.StringVar(&head, "head", "", "the control repo commit with the change")
	f.StringVar(&author, "author", "", "GitHub login of the change's author")
	f.StringSliceVar(&authorTeams, "author-teams", nil, "team slugs the author belongs to (offline; without it, --forge github looks them up)")
	formatVar(f, &format, formats())
	f.BoolVar(&strict, "strict", false, "exit 3 when the change needs a platform admin's review")
	return cmd
}

// githubMember looks the author's teams up on GitHub, in the org the base
// names as owner.
func (a *frontend) githubMember(cmd *cobra.Command, base fs.FS, author string) (func(string) (bool, error), error) {
	owner, ok := app.OwnerAt(base)
	if !ok {
		return nil, nil // the review reports an unknown base; nobody's teams count then
	}
	log, err := a.logger()
	if err != nil {
		return nil, err
	}
	cfg, err := a.config(app.ForgeGitHub, log)
	if err != nil {
		return nil, err
	}
	c, err := cfg.GitHubClient(cmd.Context(), owner, true)
	if err != nil {
		return nil, err
	}
	return func(slug string) (bool, error) { return c.TeamMember(cmd.Context(), owner, slug, author) }, nil
}

func memberOf(teams []string) func(string) (bool, error) {
	set := map[string]bool{}
	for _, t := range teams {
		set[strings.ToLower(strings.TrimSpace(t))] = true
	}
	return func(slug string) (bool, error) { return set[strings.ToLower(slug)], nil }
}

func writeReview(w io.Writer, format string, r *app.ControlReview) error {
	switch format {
	case formatJSON:
		return r.Document().WriteJSON(w)
	case formatMarkdown:
		return r.WriteMarkdown(w)
	}
	return r.WriteText(w)
}

func (a *frontend) checkWorkspaceCommand() *cobra.Command {
	var dir, workspace, namespace, format, podSecurity string
	var allow []string
	cmd := &cobra.Command{
		Use: "workspace --dir DIR --workspace NAME",
		Example: `  # in the workspace repo's CI
  fleetbot check workspace --dir . --workspace payments
  # a workspace the platform allows baseline pods and ServiceMonitors
  fleetbot check workspace --dir . --workspace payments --pod-security baseline --allow ServiceMonitor.monitoring.coreos.com`,
		Short: "Check a workspace repo offline: every clusters/*/ kustomization renders, stays in the workspace namespace and fetches nothing",
		Long: `check workspace renders every clusters/<cluster>/ kustomization of the workspace
repo at --dir with kustomize on an in-memory filesystem, as Flux will on each
cluster, and fails on what Flux's confinement (targetNamespace and the
workspace ServiceAccount) refuses there: cluster-scoped objects (Namespace,
ClusterRole, CRD, ...) and objects in another namespace. Flux objects must
stay confined too: a Kustomization or HelmRelease must impersonate the
workspace's ServiceAccount (spec.serviceAccountName: NAME) and no Flux object
may carry spec.kubeConfig, reference another namespace (sourceRef, chartRef,
dependsOn, targetNamespace, storageNamespace, ...) or use a cloud provider
identity. What the repo holds is an allowlist: only the tenant kinds
(README, Multi-tenancy lockdown; --allow adds the platform's spec.tenants.allow)
and, in Flux objects, only the spec fields they name; a Kustomization's
spec.decryption must name a Secret. Every pod a workload asks for is evaluated
offline with Kubernetes' own Pod Security policy at --pod-security (the
workspace's spec.podSecurity), and Roles and RoleBindings with Kubernetes' RBAC
escalation rule against ClusterRole admin, what the workspace's ServiceAccount
holds. Remote bases and references leaving the repo are refused before
kustomize runs: nothing is fetched, no process is started. Each problem is printed as "file: Kind/name: message"; the exit
status is 1 when there is any. Run it in the workspace repo's CI.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if workspace == "" {
				return errors.New("check workspace needs --workspace NAME (the workspace's name in the control repo)")
			}
			if namespace == "" {
				namespace = workspace
			}
			wc := app.WorkspaceCheck{Workspace: workspace, Namespace: namespace, PodSecurity: podSecurity}
			for _, s := range allow {
				k, err := app.ParseTenantKind(s)
				if err != nil {
					return err
				}
				wc.Allow = append(wc.Allow, k)
			}
			type checked struct {
				entries  []string
				problems []report.Problem
			}
			c, err := untilDone(cmd.Context(), "check workspace", func() (checked, error) {
				entries, problems, err := app.CheckWorkspaceRepoWith(dir, wc)
				return checked{entries, problems}, err
			})
			if err != nil {
				return err
			}
			entries, problems := c.entries, c.problems
			if len(entries) == 0 {
				return fmt.Errorf("%s has no clusters/<cluster>/kustomization.yaml: is it a workspace repo?", dir)
			}
			return a.writeProblems(format, "workspace "+workspace+" (namespace "+namespace+")", entries, problems)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", ".", "the workspace repo checkout")
	cmd.Flags().StringVar(&workspace, "workspace", "", "the workspace's name")
	cmd.Flags().StringVar(&namespace, "namespace", "", "the workspace namespace (default: the workspace name)")
	cmd.Flags().StringVar(&podSecurity, "pod-security", "restricted", "the Pod Security level of the workspace namespace (its spec.podSecurity): restricted or baseline")
	cmd.Flags().StringSliceVar(&allow, "allow", nil, "a further kind the workspace repo may hold, as Kind.group (the platform's spec.tenants.allow); repeatable")
	formatVar(cmd.Flags(), &format, formats())
	return cmd
}

func (a *frontend) checkClusterCommand() *cobra.Command {
	var dir, format string
	cmd := &cobra.Command{
		Use: "cluster --dir DIR",
		Example: `  # in the cluster repo's CI
  fleetbot check cluster --dir .
  fleetbot check cluster --dir path/to/cluster-prod-eu-1 -o json`,
		Short: "Check a cluster repo offline: apps/ renders with no remote bases",
		Long: `check cluster renders apps/ (the cluster admins' part) of the cluster repo at
--dir with kustomize on an in-memory filesystem and fails on build errors,
remote bases and references leaving the repo. Cluster admins may create
cluster-scoped objects on their cluster, so nothing else is refused.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			entries, problems, err := app.CheckClusterRepo(dir)
			if err != nil {
				return err
			}
			if len(entries) == 0 {
				return fmt.Errorf("%s has no apps/kustomization.yaml: is it a cluster repo?", dir)
			}
			return a.writeProblems(format, "cluster repo", entries, problems)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", ".", "the cluster repo checkout")
	formatVar(cmd.Flags(), &format, formats())
	return cmd
}

// writeProblems prints a repo check and returns exit status 1 when there
// are problems.
func (a *frontend) writeProblems(format, what string, entries []string, problems []report.Problem) error {
	switch format {
	case formatJSON:
		d := report.New(report.CommandCheck, "", nil)
		d.Checked = entries
		d.Errors = append(d.Errors, problems...)
		if err := d.WriteJSON(a.stdout); err != nil {
			return err
		}
	case formatMarkdown:
		if len(problems) == 0 {
			fmt.Fprintf(a.stdout, "### fleetbot check — ✅ %s\n\n%d kustomization(s) render cleanly: %s\n", what, len(entries), strings.Join(entries, ", "))
		} else {
			fmt.Fprintf(a.stdout, "### fleetbot check — ❌ %s: %d problem(s)\n\n", what, len(problems))
			for _, p := range problems {
				fmt.Fprintf(a.stdout, "- `%s`\n", p.String())
			}
		}
	default:
		for _, p := range problems {
			fmt.Fprintln(a.stdout, p.String())
			if p.Hint != "" {
				fmt.Fprintln(a.stdout, "    hint: "+p.Hint)
			}
		}
		if len(problems) == 0 {
			fmt.Fprintf(a.stdout, "%s: %d kustomization(s) render cleanly: %s\n", what, len(entries), strings.Join(entries, ", "))
		} else {
			fmt.Fprintf(a.stdout, "%s: %d problem(s)\n", what, len(problems))
		}
	}
	if len(problems) > 0 {
		return exitCode(report.ClassInvalidInput.ExitCode())
	}
	return nil
}
