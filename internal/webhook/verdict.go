package webhook

import (
	"context"
	"strings"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/checkrun"
)

// TeamMember reports whether login is an active member of team slug of org.
type TeamMember func(ctx context.Context, org, slug, login string) (bool, error)

// ReviewVerdict is the Verdict of "fleetbot check control" (package
// review): allowed is success, a change needing a platform admin's review
// is neutral (CODEOWNERS asks for that review), an invalid head is failure.
type ReviewVerdict struct {
	// Renderer renders both sides; share the service's long-lived one.
	Renderer *app.Renderer
	// Member looks up the author's teams; nil leaves them unknown.
	Member TeamMember
}

// CheckControl reviews the change.
func (v *ReviewVerdict) CheckControl(ctx context.Context, in VerdictInput) (VerdictResult, error) {
	ri := app.ControlChange{Base: in.Base, Head: in.Head, BaseRev: in.BaseSHA, HeadRev: in.HeadSHA, Author: in.Author,
		BaseFleet: in.BaseFleet, HeadFleet: in.HeadFleet}
	if v.Member != nil && in.Author != "" && in.Owner != "" {
		ri.Member = func(slug string) (bool, error) { return v.Member(ctx, in.Owner, slug, in.Author) }
	}
	rep, err := app.CheckControlWith(v.Renderer, ri)
	if err != nil {
		return VerdictResult{}, err
	}
	var md strings.Builder
	if err := rep.WriteMarkdown(&md); err != nil {
		return VerdictResult{}, err
	}
	conclusion := checkrun.ConclusionSuccess
	switch {
	case rep.NeedsPlatformAdmin():
		conclusion = checkrun.ConclusionNeutral
	case !rep.Valid():
		conclusion = checkrun.ConclusionFailure
	}
	return VerdictResult{Conclusion: conclusion, Verdict: rep.Verdict(), Markdown: md.String()}, nil
}
