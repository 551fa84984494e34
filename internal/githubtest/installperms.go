package githubtest

import (
	"encoding/json"

	"github.com/google/go-github/v62/github"
)

// installationPermissions are the permissions an installation answer (and a new installation
// token) names: the App's (WithAppPermissions, else the repository's app.yml), as the
// installation holds them on GitHub once its owner accepted them; without, every permission
// fleetbot uses.
func (s *Server) installationPermissions() *github.InstallationPermissions {
	if s.cfg.appPerms == nil {
		return &github.InstallationPermissions{
			Administration: github.String("write"), Contents: github.String("write"),
			PullRequests: github.String("write"), Issues: github.String("write"),
			Checks: github.String("write"), Statuses: github.String("write"),
			Members: github.String("read"), Metadata: github.String("read"),
		}
	}
	var p github.InstallationPermissions
	b, err := json.Marshal(s.cfg.appPerms)
	if err == nil {
		err = json.Unmarshal(b, &p)
	}
	if err != nil {
		return &github.InstallationPermissions{}
	}
	return &p
}
