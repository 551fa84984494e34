package checkrun

import "time"

// OpenPullRequest is an open pull request of the control repo, as a resync sees it when it
// looks for heads without a completed check run.
type OpenPullRequest struct {
	Number int
	// Head and Base are the commits of its head and base; Author its author's login.
	Head, Base, Author string
}

// State is a check run's state on GitHub: the newest run of a name on a commit.
type State struct {
	ID int64
	// Status is GitHub's: queued, in_progress or completed.
	Status string
	// StartedAt is when it started (zero when GitHub does not say).
	StartedAt time.Time
}
