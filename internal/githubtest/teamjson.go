package githubtest

import "encoding/json"

// listedTeamJSON is a team as GitHub's lists of teams show it: teamJSON's fields plus "parent"
// (null: the fake has no nested teams) and "type" ("organization": the fake has no enterprise
// teams). A property teamJSON sets is never overwritten.
// https://docs.github.com/rest/teams/teams#list-teams
func (s *Server) listedTeamJSON(t *team, perm string) map[string]any {
	data, err := json.Marshal(s.teamJSON(t, perm))
	out := map[string]any{}
	if err == nil {
		_ = json.Unmarshal(data, &out)
	}
	for k, v := range map[string]any{"parent": nil, "type": "organization"} {
		if _, ok := out[k]; !ok {
			out[k] = v
		}
	}
	return out
}
