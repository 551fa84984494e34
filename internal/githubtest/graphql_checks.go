package githubtest

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// The check runs of a commit in the GraphQL graph: Repository.object(oid:) resolves a commit,
// Commit.checkSuites its check suites and CheckSuite.checkRuns their runs. GitHub keeps one check
// suite per GitHub App per commit and files every check run the App creates on the commit in
// it; the fake keeps no suites of its own and derives them so from the check runs.
// https://docs.github.com/graphql/reference/objects#commit (checkSuites, filterBy: CheckSuiteFilter)
// https://docs.github.com/graphql/reference/objects#checksuite (checkRuns, filterBy: CheckRunFilter)
// https://docs.github.com/rest/guides/using-the-rest-api-to-interact-with-checks#about-check-suites

// object is Repository.object(oid:): the commit of that id; null when the repository has no
// such object. Only commits are answered (fleetbot reads no other object by id).
func (r *gqlRepo) object(args map[string]any) (any, error) {
	oid := str(args["oid"])
	if oid == "" {
		return nil, fmt.Errorf("fake github: Repository.object is answered by oid only")
	}
	g, err := r.s.openRepoGit(r.rm)
	if err != nil {
		return nil, err
	}
	if _, err := g.commit(plumbing.NewHash(oid)); err != nil {
		return gqlObject(nil), nil
	}
	return &gqlCommit{s: r.s, rm: r.rm, oid: oid}, nil
}

// checkSuites is Commit.checkSuites: one suite per App with check runs on the commit, by App
// id, filtered by filterBy's appId and checkName (a suite with a run of that name).
func (c *gqlCommit) checkSuites(args map[string]any) (any, error) {
	filter, _ := args["filterBy"].(map[string]any)
	appID, byApp := intArg(filter["appId"])
	name := str(filter["checkName"])
	key := repoKey(c.rm.Owner, c.rm.Name)
	suites := map[int64][]*checkRun{}
	for _, id := range slices.Sorted(maps.Keys(c.s.st.CheckRuns)) {
		cr := c.s.st.CheckRuns[id]
		if cr.Repo == key && cr.HeadSHA == c.oid {
			suites[cr.AppID] = append(suites[cr.AppID], cr)
		}
	}
	var nodes []gqlObject
	for _, app := range slices.Sorted(maps.Keys(suites)) {
		runs := suites[app]
		if byApp && app != appID {
			continue
		}
		if name != "" && !slices.ContainsFunc(runs, func(cr *checkRun) bool { return cr.Name == name }) {
			continue
		}
		nodes = append(nodes, &gqlCheckSuite{runs: runs})
	}
	return connection("CheckSuiteConnection", nodes, args)
}

// gqlCheckSuite is a CheckSuite: one App's check runs on one commit, oldest first.
type gqlCheckSuite struct{ runs []*checkRun }

func (cs *gqlCheckSuite) typename() string { return "CheckSuite" }

func (cs *gqlCheckSuite) field(name string, args map[string]any) (any, error) {
	if name != "checkRuns" {
		return nil, fmt.Errorf("fake github: CheckSuite.%s is not implemented", name)
	}
	filter, _ := args["filterBy"].(map[string]any)
	check := str(filter["checkName"])
	// checkType LATEST: the newest run of each name only (a re-run replaces the run before it).
	latest := map[string]int64{}
	for _, cr := range cs.runs {
		latest[cr.Name] = max(latest[cr.Name], cr.ID)
	}
	var nodes []gqlObject
	for _, cr := range cs.runs {
		if (check == "" || cr.Name == check) && (str(filter["checkType"]) != "LATEST" || latest[cr.Name] == cr.ID) {
			nodes = append(nodes, checkRunNode(cr))
		}
	}
	return connection("CheckRunConnection", nodes, args)
}

// checkRunNode is a CheckRun: its databaseId (the REST id), status as CheckStatusState and
// startedAt (null before it started).
func checkRunNode(cr *checkRun) gqlObject {
	var started any
	if !cr.StartedAt.IsZero() {
		started = gqlDateTime(cr.StartedAt)
	}
	return &gqlPlain{name: "CheckRun", fields: map[string]any{
		"databaseId": cr.ID, "name": cr.Name, "status": strings.ToUpper(cr.Status), "startedAt": started,
	}}
}
