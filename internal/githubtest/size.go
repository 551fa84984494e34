package githubtest

import "time"

// sizeEntry is a repo's size as last measured, and the push it was measured after.
type sizeEntry struct {
	pushedAt time.Time
	kb       int
}

// repoSizeLocked returns a repo's size in KB as the REST API reports it (0 for an empty repo),
// measured on disk once per push (the fake's clock counts whole seconds, so pushes within one
// second share a measurement; GitHub too updates sizes lazily). Listing an org of a thousand
// repos must not walk a thousand git directories. Callers hold s.mu.
func (s *Server) repoSizeLocked(rm *repoMeta) int {
	dir := s.gitDir(rm)
	if e, ok := s.sizes[dir]; ok && e.pushedAt.Equal(rm.PushedAt) {
		return e.kb
	}
	kb := 0
	if g, err := s.openRepoGit(rm); err == nil && !g.empty() {
		kb = max(1, int(dirSize(dir)/1024))
	}
	if s.sizes == nil {
		s.sizes = map[string]sizeEntry{}
	}
	s.sizes[dir] = sizeEntry{pushedAt: rm.PushedAt, kb: kb}
	return kb
}
