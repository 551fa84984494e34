package pr

import (
	"strings"
	"time"
)

// Observed is what a snapshot showed of a target repo beyond the decision itself: the facts
// a status view reports (which revision the repo carries, what its pull request waits on, how
// Flux is doing). Decide fills it; nothing decides on it.
type Observed struct {
	// Base is the default-branch head and BaseStatus its combined commit status (Flux posts
	// one for the commit it applied); "" when the forge cannot tell.
	Base       string `json:"base,omitempty"`
	BaseStatus string `json:"baseStatus,omitempty"`
	// BaseFailing are the failing commit statuses of the default-branch head: which
	// Kustomization or HelmRelease fails, its message and link.
	BaseFailing []CommitStatus `json:"baseFailing,omitempty"`
	// Merged is the control-repo revision fleetbot's newest merged pull request carried, or
	// the Fleetbot-Source trailer of the default-branch head; "" when unknown.
	Merged string `json:"merged,omitempty"`
	// PR is the open fleetbot pull request, nil when there is none.
	PR *ObservedPR `json:"pr,omitempty"`
}

// ObservedPR is what a status view shows of an open fleetbot pull request.
type ObservedPR struct {
	Number int    `json:"number"`
	URL    string `json:"url,omitempty"`
	// Source is the control-repo revision the pull request carries.
	Source string `json:"source,omitempty"`
	// Opened is when it was opened (zero when unknown).
	Opened time.Time `json:"opened,omitzero"`
	// Review is GitHub's review decision and Checks the combined status of its head commit;
	// "" when the forge cannot tell.
	Review string `json:"review,omitempty"`
	Checks string `json:"checks,omitempty"`
	// Blocked is true once fleetbot stopped updating it (a human pushed to its branch).
	Blocked bool `json:"blocked,omitempty"`
}

// observe reads the status facts out of a snapshot; m is the marker of its pull request's body
// (parseMarker), read once by the caller.
func observe(s *Snapshot, m marker) Observed {
	var o Observed
	if s == nil {
		return o
	}
	if s.Base != nil {
		o.Base, o.BaseStatus, o.BaseFailing = s.Base.SHA, s.Base.Status, s.Base.Failing
		o.Merged = trailerSource(s.Base.Message)
	}
	if s.Merged != "" {
		o.Merged = s.Merged
	}
	if p := s.PR; p != nil {
		switch p.State {
		case StateMerged:
			if m.Source != "" {
				o.Merged = m.Source
			}
		case StateOpen:
			op := &ObservedPR{Number: p.Number, URL: p.URL, Source: m.Source, Opened: p.CreatedAt, Review: p.Review, Blocked: m.Blocked}
			if s.Bot != nil { // the pull request's head: its checks
				op.Checks = s.Bot.Status
			}
			o.PR = op
		}
	}
	return o
}

// SourceOf returns the control-repo revision recorded in a fleetbot pull request body, "" when
// the body carries none.
func SourceOf(body string) string {
	m, _ := parseMarker(body)
	return m.Source
}

// WavesOf returns the lists of rollout waves a fleetbot pull request body records (see
// Options.Waves), nil when it records none.
func WavesOf(body string) []string {
	m, _ := parseMarker(body)
	return m.Waves
}

// TreeOf returns the desired tree a fleetbot pull request body records (the tree its bot
// commit carries), "" when the body carries none.
func TreeOf(body string) string {
	m, _ := parseMarker(body)
	return m.Tree
}

// trailerSource returns the Fleetbot-Source trailer of a commit message, "" without one.
func trailerSource(msg string) string {
	for _, line := range strings.Split(msg, "\n") {
		if v, ok := strings.CutPrefix(line, TrailerSource+": "); ok && strings.TrimSpace(v) != "unknown" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
