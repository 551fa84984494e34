package githubtest

// Run-time tuning of a Server, for programs that build a large fleet on the fake before
// measuring it (cmd/benchtable): set up thousands of repos with no limits and no
// persistence, then turn GitHub's limits on for the part being measured.

// SetContentCreationLimit changes the secondary content-creation limit of a running server,
// with the meaning of WithContentCreationLimit (0 turns a window off). Content created while
// no limit was on does not count in the windows that follow.
func (s *Server) SetContentCreationLimit(perMinute, perHour int, withRetryAfter bool) {
	s.ctlMu.Lock()
	defer s.ctlMu.Unlock()
	s.cfg.ccPerMinute, s.cfg.ccPerHour, s.cfg.ccRetryAfter = perMinute, perHour, withRetryAfter
}

// DisablePersistence stops a server made with New from rewriting state.json after every
// change (the bare repos stay on disk): the state of a fleet of thousands of repos is
// megabytes, and a program that never restarts the server does not need it. NewServer
// never persists. Call it before serving.
func (s *Server) DisablePersistence() { s.save = false }
