package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing/fstest"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/spf13/cobra"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/review"
)

// exitNotAllowed is check control --strict's status for a change the
// author's teams may not make alone.
const exitNotAllowed = 3

func (a *app) checkCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Review-time checks: a control-repo change (check control), a workspace or cluster repo (check workspace, check cluster)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(a.checkControlCommand(), a.checkWorkspaceCommand(), a.checkClusterCommand())
	return cmd
}

func (a *app) checkControlCommand() *cobra.Command {
	var (
		base, head, author, format string
		authorTeams                []string
		strict                     bool
	)
	cmd := &cobra.Command{
		Use:   "control --base REF --head REF [--author LOGIN]",
		Short: "Review a control-repo change: validity, the target repos and personas it reaches, and whether its author may make it",
		Long: `check control reads two commits of the control repo clone at --control (no
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
needs a platform admin's review.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if base == "" || head == "" {
				return errors.New("check control needs --base REF and --head REF")
			}
			repo, err := git.PlainOpenWithOptions(a.control, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
			if err != nil {
				return fmt.Errorf("--control %s is not a git clone of the control repo: %w", a.control, err)
			}
			baseFS, baseRev, err := treeFS(repo, base)
			if err != nil {
				return err
			}
			headFS, headRev, err := treeFS(repo, head)
			if err != nil {
				return err
			}
			// The control repo may be a directory of a larger repository
			// (platform/fleet/ in a monorepo): review that directory's tree.
			if baseFS, headFS, err = subTrees(repo, a.control, baseFS, headFS); err != nil {
				return err
			}
			in := review.Input{Base: baseFS, Head: headFS, BaseRev: baseRev, HeadRev: headRev, Author: author}
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
			rep, err := review.Review(in, fanout.NewRenderer(fanout.Options{}))
			if err != nil {
				return err
			}
			if err := writeReview(a.stdout, format, rep); err != nil {
				return err
			}
			switch {
			case !rep.Valid():
				return exitCode(1)
			case strict && rep.Verdict != review.Allowed:
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
	choiceVar(f, &format, "format", formatText, formats(), "output format")
	f.BoolVar(&strict, "strict", false, "exit 3 when the change needs a platform admin's review")
	return cmd
}

// githubMember looks the author's teams up on GitHub, in the org the base
// names as owner.
func (a *app) githubMember(cmd *cobra.Command, base fs.FS, author string) (func(string) (bool, error), error) {
	repo, err := control.Load(base)
	if err != nil {
		return nil, nil // the review reports an unknown base; nobody's teams count then
	}
	log, err := a.logger()
	if err != nil {
		return nil, err
	}
	owner := repo.Platform.Spec.Owner
	cfg, err := a.github.config(owner, true, log)
	if err != nil {
		return nil, err
	}
	c, err := ghforge.New(cmd.Context(), cfg)
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

func writeReview(w io.Writer, format string, r *review.Report) error {
	switch format {
	case formatJSON:
		return r.WriteJSON(w)
	case formatMarkdown:
		return r.WriteMarkdown(w)
	}
	return r.WriteText(w)
}

// treeFS reads the tree of a commit of repo as an fs.FS, straight from git
// objects: no checkout, no work tree. Symlinks keep their mode so the
// loader refuses them; submodules are skipped.
// subTrees narrows the trees of a commit pair to dir, the control repo's directory inside the
// clone (unchanged when dir is the clone's root).
func subTrees(repo *git.Repository, dir string, base, head fs.FS) (fs.FS, fs.FS, error) {
	sub, err := dirInClone(repo, dir)
	if err != nil || sub == "." {
		return base, head, err
	}
	if base, err = fs.Sub(base, sub); err != nil {
		return nil, nil, err
	}
	head, err = fs.Sub(head, sub)
	return base, head, err
}

// dirInClone is dir relative to the root of the git work tree holding it ("." at the root).
func dirInClone(repo *git.Repository, dir string) (string, error) {
	wt, err := repo.Worktree()
	if err != nil {
		return ".", nil // a bare clone: its tree is the control repo
	}
	root, err := filepath.EvalSymlinks(wt.Filesystem.Root())
	if err != nil {
		return "", fmt.Errorf("locating the git work tree of %s: %w", dir, err)
	}
	abs, err := filepath.Abs(dir)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return "", fmt.Errorf("--control %s: %w", dir, err)
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("--control %s is outside its git work tree %s", dir, root)
	}
	return filepath.ToSlash(rel), nil
}

func treeFS(repo *git.Repository, ref string) (fs.FS, string, error) {
	h, err := repo.ResolveRevision(plumbing.Revision(ref))
	if err != nil {
		return nil, "", fmt.Errorf("resolving %q in the control repo: %w", ref, err)
	}
	c, err := repo.CommitObject(*h)
	if err != nil {
		return nil, "", fmt.Errorf("reading commit %s: %w", h, err)
	}
	tree, err := c.Tree()
	if err != nil {
		return nil, "", fmt.Errorf("reading the tree of %s: %w", h, err)
	}
	out := fstest.MapFS{}
	err = tree.Files().ForEach(func(f *object.File) error {
		switch f.Mode {
		case filemode.Submodule:
			return nil
		case filemode.Symlink:
			out[f.Name] = &fstest.MapFile{Mode: fs.ModeSymlink}
			return nil
		}
		data, err := f.Contents()
		if err != nil {
			return fmt.Errorf("reading %s at %s: %w", f.Name, h, err)
		}
		out[f.Name] = &fstest.MapFile{Data: []byte(data), Mode: 0o644}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return out, h.String(), nil
}

func (a *app) checkWorkspaceCommand() *cobra.Command {
	var dir, workspace, namespace, format string
	cmd := &cobra.Command{
		Use:   "workspace --dir DIR --workspace NAME",
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
identity. Remote bases and references leaving the repo are refused before
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
			files, err := readRepoDir(dir)
			if err != nil {
				return err
			}
			entries := entriesUnder(files, "clusters", true)
			if len(entries) == 0 {
				return fmt.Errorf("%s has no clusters/<cluster>/kustomization.yaml: is it a workspace repo?", dir)
			}
			problems := fanout.CheckRepo(files, fanout.RepoCheck{Entries: entries, Namespace: namespace, ServiceAccount: workspace})
			return a.writeProblems(format, "workspace "+workspace+" (namespace "+namespace+")", entries, problems)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", ".", "the workspace repo checkout")
	cmd.Flags().StringVar(&workspace, "workspace", "", "the workspace's name")
	cmd.Flags().StringVar(&namespace, "namespace", "", "the workspace namespace (default: the workspace name)")
	choiceVar(cmd.Flags(), &format, "format", formatText, formats(), "output format")
	return cmd
}

func (a *app) checkClusterCommand() *cobra.Command {
	var dir, format string
	cmd := &cobra.Command{
		Use:   "cluster --dir DIR",
		Short: "Check a cluster repo offline: apps/ renders with no remote bases",
		Long: `check cluster renders apps/ (the cluster admins' part) of the cluster repo at
--dir with kustomize on an in-memory filesystem and fails on build errors,
remote bases and references leaving the repo. Cluster admins may create
cluster-scoped objects on their cluster, so nothing else is refused.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			files, err := readRepoDir(dir)
			if err != nil {
				return err
			}
			entries := entriesUnder(files, "apps", false)
			if len(entries) == 0 {
				return fmt.Errorf("%s has no apps/kustomization.yaml: is it a cluster repo?", dir)
			}
			problems := fanout.CheckRepo(files, fanout.RepoCheck{Entries: entries})
			return a.writeProblems(format, "cluster repo", entries, problems)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", ".", "the cluster repo checkout")
	choiceVar(cmd.Flags(), &format, "format", formatText, formats(), "output format")
	return cmd
}

// writeProblems prints a repo check and returns exit status 1 when there
// are problems.
func (a *app) writeProblems(format, what string, entries []string, problems []fanout.RepoProblem) error {
	switch format {
	case formatJSON:
		if problems == nil {
			problems = []fanout.RepoProblem{}
		}
		if err := writeJSON(a.stdout, map[string]any{"checked": entries, "problems": problems}); err != nil {
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
		return exitCode(1)
	}
	return nil
}

// entriesUnder lists the kustomization directories to render: top itself,
// or with perChild each top/<name>/ holding a kustomization.
func entriesUnder(files map[string][]byte, top string, perChild bool) []string {
	seen := map[string]bool{}
	for p := range files {
		dir, name := path.Split(p)
		dir = strings.TrimSuffix(dir, "/")
		switch name {
		case "kustomization.yaml", "kustomization.yml", "Kustomization":
		default:
			continue
		}
		if (perChild && path.Dir(dir) == top) || (!perChild && dir == top) {
			seen[dir] = true
		}
	}
	out := make([]string, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// readRepoDir reads a repo checkout into memory (every regular file but
// .git), so kustomize never touches the disk or the network. Symlinks are
// not followed. The control repo's bounds apply (control.MaxFileBytes a
// file, checked before reading, control.MaxFiles, control.MaxTotalBytes):
// a workspace or cluster repo is written by its admins, and check runs in CI
// on their pull requests.
func readRepoDir(dir string) (map[string][]byte, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", dir, err)
	}
	defer root.Close()
	files := map[string][]byte{}
	var count int
	var total int64
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		count++
		total += info.Size()
		switch {
		case info.Size() > control.MaxFileBytes:
			return fmt.Errorf("%w: %s: %d bytes, more than the %d a file may have; nothing was checked", control.ErrTooLarge, p, info.Size(), control.MaxFileBytes)
		case count > control.MaxFiles:
			return fmt.Errorf("%w: %s: the repo has more than %d files; nothing was checked", control.ErrTooLarge, p, control.MaxFiles)
		case total > control.MaxTotalBytes:
			return fmt.Errorf("%w: %s: the repo holds more than %d bytes; nothing was checked", control.ErrTooLarge, p, control.MaxTotalBytes)
		}
		f, err := root.Open(filepath.FromSlash(p))
		if err != nil {
			return err
		}
		b, err := io.ReadAll(io.LimitReader(f, control.MaxFileBytes+1))
		f.Close()
		if err != nil {
			return err
		}
		if len(b) > control.MaxFileBytes {
			return fmt.Errorf("%w: %s grew past %d bytes while read; nothing was checked", control.ErrTooLarge, p, control.MaxFileBytes)
		}
		files[p] = b
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", dir, err)
	}
	return files, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
