package app

import (
	"io"
	"io/fs"

	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/report"
	"github.com/fleetbot-io/fleetbot/internal/review"
)

// ControlChange is one proposed change of the control repo, for CheckControl.
type ControlChange struct {
	// Base and Head are the control repo trees before and after the change; BaseRev and
	// HeadRev name them (commit SHAs or refs).
	Base, Head       fs.FS
	BaseRev, HeadRev string
	// Author is the login of the change's author; Member reports whether the author is in a
	// team (nil: unknown, so nothing is allowed on the strength of the author's teams).
	Author string
	Member func(slug string) (bool, error)
	// BaseFleet and HeadFleet are Base and Head already loaded and rendered (valid), when the
	// caller has them; nil: the review loads and renders that side.
	BaseFleet, HeadFleet *Fleet
}

// ControlReview is check control's verdict on a change.
type ControlReview struct {
	rep *review.Report
}

// ReviewReport is check control's report as plan-json carries it: the verdict, its reasons,
// the personas and target repos the change reaches.
type ReviewReport = review.Report

// Report is the review's report as it is (plan-json's review).
func (r *ControlReview) Report() *ReviewReport { return r.rep }

// Issues are the errors the change leaves in the control repo, on file and line.
func (r *ControlReview) Issues() Issues { return r.rep.Issues }

// Reasons say why the change needs a platform admin's review.
func (r *ControlReview) Reasons() []string { return r.rep.Reasons }

// CheckControl judges a control repo change against the persona rules: who may make it,
// which target repos it reaches; the renderer is the configuration's.
func (c Config) CheckControl(ch ControlChange) (*ControlReview, error) {
	return CheckControlWith(c.Renderer(), ch)
}

// CheckControlWith is CheckControl with the caller's renderer (a service's long-lived one).
func CheckControlWith(r *fanout.Renderer, ch ControlChange) (*ControlReview, error) {
	in := review.Input{Base: ch.Base, Head: ch.Head, BaseRev: ch.BaseRev, HeadRev: ch.HeadRev, Author: ch.Author, Member: ch.Member,
		BaseLoaded: ch.BaseFleet.loaded(), HeadLoaded: ch.HeadFleet.loaded()}
	rep, err := review.Review(in, r)
	if err != nil {
		return nil, err
	}
	return &ControlReview{rep: rep}, nil
}

// Valid is false when the change leaves the control repo with errors.
func (r *ControlReview) Valid() bool { return r.rep.Valid() }

// Allowed is true when the author may make the change without a platform admin's review.
func (r *ControlReview) Allowed() bool { return r.rep.Verdict == review.Allowed }

// Verdict names the verdict: allowed, needs a platform admin's review, or invalid.
func (r *ControlReview) Verdict() string { return r.rep.Verdict }

// NeedsPlatformAdmin is true when the change is valid but needs a platform admin's review.
func (r *ControlReview) NeedsPlatformAdmin() bool { return r.rep.Verdict == review.NeedsPlatformAdmin }

// Document is the review as the report: its errors on file and line, the verdict in Review.
func (r *ControlReview) Document() *report.Document {
	d := report.New(report.CommandCheck, r.rep.Head, nil)
	for _, is := range r.rep.Issues {
		d.Errors = append(d.Errors, report.Problem{File: is.Pos.File, Line: is.Pos.Line, Message: is.Message, Hint: is.Hint})
	}
	d.Review = r.rep
	return d
}

// WriteText and WriteMarkdown write the review for a terminal and for a PR comment.
func (r *ControlReview) WriteText(w io.Writer) error     { return r.rep.WriteText(w) }
func (r *ControlReview) WriteMarkdown(w io.Writer) error { return r.rep.WriteMarkdown(w) }

// loaded is f as the review takes it (nil for nil).
func (f *Fleet) loaded() *review.Loaded {
	if f == nil {
		return nil
	}
	return &review.Loaded{Repo: f.Repo, Targets: f.Targets}
}
