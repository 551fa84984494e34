package policy

// Converge returns the access a repo has once p is applied to observed. The
// forges write exactly these steps, and the GitHub forge caches the result,
// so what is written and what is remembered cannot disagree. Observed is not
// modified.
func Converge(observed Access, p Plan) Access {
	var out Access
	for _, u := range Units {
		u.Converge(observed, p, &out)
	}
	return out
}

// Describe lists the plan in words, one line per step, in the order a
// reader checks them: what is added, what changes, what is taken away, the
// protection, then the drift left alone.
func (p *Plan) Describe() []string {
	var out []string
	for _, u := range Units {
		out = append(out, u.Describe(p)...)
	}
	for _, w := range p.Withheld {
		out = append(out, "kept: "+w)
	}
	return out
}
