package control

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/fleetbot-io/fleetbot/internal/window"
)

// MaxWindows bounds spec.rollout.windows.
const MaxWindows = 50

// windowCheckFrom is where validation starts looking for allow time: a year from it covers
// every daylight-saving rule once, and a fixed start makes validate's verdict the same on
// every run.
var windowCheckFrom = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// weekdays are the day names of a change window, by time.Weekday.
var weekdays = [7]string{"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"}

// windowProblem is one invalid field of a change window.
type windowProblem struct {
	field, hint, msg string
}

// parse reads the change window into its schedule form, with every invalid field.
func (cw ChangeWindow) parse() (window.Window, []windowProblem) {
	var w window.Window
	var ps []windowProblem
	bad := func(field, hint, format string, args ...any) {
		ps = append(ps, windowProblem{field, hint, fmt.Sprintf(format, args...)})
	}
	switch cw.Kind {
	case WindowAllow:
	case WindowDeny:
		w.Deny = true
	case "":
		bad("kind", "use kind: allow (rollouts may proceed inside it) or kind: deny (a freeze)", "the window has no kind")
	default:
		bad("kind", "use allow or deny", "invalid window kind %q", cw.Kind)
	}
	for i, d := range cw.Days {
		j := slices.Index(weekdays[:], d)
		switch {
		case j < 0:
			bad(fmt.Sprintf("days.%d", i), "use Mon, Tue, Wed, Thu, Fri, Sat or Sun", "invalid day %q", d)
		case w.Days[j]:
			bad(fmt.Sprintf("days.%d", i), "name each day once", "day %s is listed twice", d)
		default:
			w.Days[j] = true
		}
	}
	if t, err := time.Parse("15:04", cw.Start); err != nil || len(cw.Start) != 5 {
		bad("start", "use the time of day on a 24-hour clock, HH:MM, such as 09:00 or 22:30", "invalid start %q", cw.Start)
	} else {
		w.Start = time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute
	}
	d, err := time.ParseDuration(cw.Duration)
	switch {
	case err != nil:
		bad("duration", "use a Go duration such as 8h or 90m", "invalid duration %q", cw.Duration)
	case d < time.Minute:
		bad("duration", "use a duration of a minute or more, such as 8h", "duration %s is shorter than a minute", cw.Duration)
	case d > window.MaxDuration:
		bad("duration", "use at most 168h (a week): a longer window covers itself", "duration %s is longer than a week", cw.Duration)
	default:
		w.Duration = d
	}
	w.Location = time.UTC
	if cw.TimeZone != "" {
		loc, err := time.LoadLocation(cw.TimeZone)
		switch {
		case cw.TimeZone == "Local":
			bad("timeZone", "name an IANA time zone such as Europe/Berlin or America/New_York", "timeZone Local depends on the machine running fleetbot")
		case err != nil:
			bad("timeZone", "name an IANA time zone such as Europe/Berlin, America/New_York or UTC", "unknown time zone %q", cw.TimeZone)
		default:
			w.Location = loc
		}
	}
	return w, ps
}

// Schedule returns spec.rollout.windows as a schedule (nil: no windows, always open). The
// windows have been validated at load; an invalid one is left out.
func (r *Repo) Schedule() window.Schedule {
	if r == nil || r.Platform == nil {
		return nil
	}
	var s window.Schedule
	for _, cw := range r.Platform.Spec.Rollout.Windows {
		if w, ps := cw.parse(); len(ps) == 0 {
			s = append(s, w)
		}
	}
	return s
}

// rolloutRules checks what a rollout does on its own: the failure action, the change windows
// (and that they leave time to roll out) and how Flux reports health.
func (v *validator) rolloutRules(r RolloutSpec, src Source) {
	v.onFailure(r.OnFailure, src, "spec.rollout.onFailure")
	if len(r.Windows) > MaxWindows {
		v.add(src.At("spec.rollout.windows"), "combine windows: a few allow windows and freezes are enough",
			"%d change windows, more than %d", len(r.Windows), MaxWindows)
	}
	var s window.Schedule
	valid := true
	for i, cw := range r.Windows {
		path := fmt.Sprintf("spec.rollout.windows.%d", i)
		w, ps := cw.parse()
		for _, p := range ps {
			v.add(src.At(path+"."+p.field), p.hint, "window %d: %s", i+1, p.msg)
		}
		valid = valid && len(ps) == 0
		s = append(s, w)
	}
	if valid && len(r.Windows) <= MaxWindows && s.NeverOpens(windowCheckFrom) {
		v.add(src.At("spec.rollout.windows"), "shorten a deny window or widen an allow window: as written, no new pull request would ever open and nothing would ever merge",
			"the deny windows cover every minute the allow windows give: no time is left to roll out")
	}
	v.health(r.Health, src)
}

// health checks spec.rollout.health: a known provider, and for generic-hmac the URL the
// clusters post to.
func (v *validator) health(h HealthSpec, src Source) {
	switch h.Provider {
	case "", HealthGitHub:
		if h.URL != "" {
			v.add(src.At("spec.rollout.health.url"), "set provider: generic-hmac to have Flux post to fleetbot serve, or remove url",
				"health url is only used with provider generic-hmac (provider is %s)", HealthGitHub)
		}
		return
	case HealthGenericHMAC:
	default:
		v.add(src.At("spec.rollout.health.provider"), "use github (commit statuses) or generic-hmac (events to fleetbot serve)",
			"invalid health provider %q", h.Provider)
		return
	}
	if h.URL == "" {
		v.add(src.At("spec.rollout.health"), "set url to fleetbot serve's health endpoint as the clusters reach it, e.g. https://fleetbot.example.com/health",
			"health provider generic-hmac needs a url")
		return
	}
	if why := healthURLProblem(h.URL); why != "" {
		v.add(src.At("spec.rollout.health.url"), "use an absolute http(s) URL without credentials, query or fragment, e.g. https://fleetbot.example.com/health",
			"invalid health url %q: %s", h.URL, why)
	}
}

// healthURLProblem says what is wrong with a health URL, "" when nothing is.
func healthURLProblem(s string) string {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "not a URL"
	case u.Scheme != "https" && u.Scheme != "http":
		return "the scheme must be https or http"
	case u.Host == "":
		return "no host"
	case u.User != nil:
		return "it carries credentials, which would be readable in every cluster repo"
	case u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(s, "?") || strings.HasSuffix(s, "#"):
		return "a query or fragment would end up in the middle of each cluster's address"
	case strings.ContainsAny(s, " \t\n\"'\\"):
		return "it holds spaces, quotes or backslashes"
	}
	return ""
}

// onFailure checks a failure action: halt, rollback or unset.
func (v *validator) onFailure(s string, src Source, path string) {
	switch s {
	case "", OnFailureHalt, OnFailureRollback:
	default:
		v.add(src.At(path), "use halt (stop the rollout) or rollback (stop it and restore the last healthy revision where it reached)",
			"invalid onFailure %q", s)
	}
}

// waveRules checks a wave's failure budget, failure action and approval.
func (v *validator) waveRules(w Wave, src Source, path string) {
	v.countOrPercent(w.MaxFailures.IntOrString(), src, path+".maxFailures")
	v.countOrPercent(w.MaxUnavailable.IntOrString(), src, path+".maxUnavailable")
	v.onFailure(w.OnFailure, src, path+".onFailure")
	switch w.Approval {
	case "", ApprovalRequired:
	default:
		v.add(src.At(path+".approval"), "use approval: required, or leave it out for a wave that starts on its own", "wave %q: invalid approval %q", w.Name, w.Approval)
	}
	if w.Approval == ApprovalRequired {
		v.approvers(w, src, path)
	}
}

// approvers refuses a wave that needs an approval nobody can give: the control repo's
// CODEOWNERS gives its approval file (rollout/approvals/<wave>.yaml) only to owners who cannot
// review a change there, bot accounts, or teams other than the platform admins when fleetbot
// guards the control repo (spec.repos.control, access enforce: it keeps every other team off
// the repo, and GitHub ignores a code owner without write access).
func (v *validator) approvers(w Wave, src Source, path string) {
	file := ApprovalFile(w.Name)
	rule, ok := v.r.Codeowners.Owner(file)
	if !ok || len(rule.Owners) == 0 {
		return // no code owner: whoever may merge to the control repo (platform admins) approves
	}
	p := v.r.Platform.Spec
	guarded := p.Repos.Control != "" && p.Access.Mode != AccessAdditive
	var why []string
	for _, o := range rule.Owners {
		switch {
		case botOwner(o):
			why = append(why, o+" is a bot")
		case guarded && strings.HasPrefix(o, "@") && strings.Contains(o, "/") && !slices.Contains(p.Admins, strings.ToLower(o[strings.Index(o, "/")+1:])):
			why = append(why, o+" is no platform admin team, and fleetbot keeps every other team off the control repo "+p.Repos.Control)
		default:
			return // a possible approver
		}
	}
	v.add(src.At(path+".approval"), fmt.Sprintf("give %s to a team of approvers in %s (for example /%s/ @%s/%s), or drop approval: required",
		file, v.r.Codeowners.File, ApprovalsDir, p.Owner, firstOr(p.Admins, "platform")),
		"wave %q requires approval, but nobody can give it: %s:%d gives %s only to owners who cannot approve (%s)",
		w.Name, v.r.Codeowners.File, rule.Line, file, strings.Join(why, "; "))
}

func firstOr(s []string, def string) string {
	if len(s) == 0 {
		return def
	}
	return s[0]
}

// ApprovalFile is the file approving wave (`fleetbot rollout approve WAVE` writes it).
func ApprovalFile(wave string) string { return ApprovalsDir + "/" + wave + ".yaml" }

// SkipFile is the file skipping cluster (`fleetbot rollout skip CLUSTER` writes it).
func SkipFile(cluster string) string { return SkipsDir + "/" + cluster + ".yaml" }

// rolloutRuleWarnings lists rollout settings that are legal but almost always a mistake: a
// failure budget that lets every cluster of the wave fail, maxFailures above maxUnavailable
// (failures count as unavailable, so it never binds), rollback pull requests that wait for a
// human merge, health reports with nothing to report to, an http health URL, and records
// naming no wave or cluster.
func rolloutRuleWarnings(r *Repo) Issues {
	var is Issues
	src := r.Platform.Source
	spec := r.Platform.Spec
	lists := []struct {
		base     string
		waves    []Wave
		clusters []*Cluster
	}{{"spec.rollout.waves", spec.Rollout.Waves, r.Clusters}}
	for i, comp := range spec.Components {
		if comp.Rollout == nil {
			continue
		}
		var running []*Cluster
		for _, c := range r.Clusters {
			if ok, err := comp.ClusterSelector.Matches(c.Metadata.Labels); err == nil && ok {
				running = append(running, c)
			}
		}
		lists = append(lists, struct {
			base     string
			waves    []Wave
			clusters []*Cluster
		}{fmt.Sprintf("spec.components.%d.rollout.waves", i), comp.Rollout.Waves, running})
	}
	declared := map[string]bool{}
	for _, l := range lists {
		for j, w := range l.waves {
			declared[w.Name] = true
			path := fmt.Sprintf("%s.%d", l.base, j)
			size := 0
			for _, c := range l.clusters {
				if WaveOf(l.waves[:j+1], c.Metadata.Labels) == j {
					size++
				}
			}
			is = append(is, budgetWarnings(w, size, src, path)...)
			if spec.Rollout.FailureAction(w) == OnFailureRollback && mergeOf(spec, w) == MergeManual {
				is.Add(src.At(path), "set merge: auto on the wave (or spec.pullRequests.merge: auto) to restore without waiting",
					"wave %s rolls back on failure, but its pull requests merge by hand: the rollback pull requests wait for a platform admin to merge them", w.Name)
			}
		}
	}
	if spec.Rollout.Health.Provider == HealthGenericHMAC && !r.HasRollout() {
		is.Add(src.At("spec.rollout.health"), "declare spec.rollout.waves, or remove spec.rollout.health",
			"health provider generic-hmac is set, but no waves are declared: nothing reports health")
	}
	if u, err := url.Parse(spec.Rollout.Health.URL); err == nil && u.Scheme == "http" {
		is.Add(src.At("spec.rollout.health.url"), "use https: the signature proves who sent an event, but over http anyone on the way can read it",
			"health url %s is not https", spec.Rollout.Health.URL)
	}
	return append(is, recordWarnings(r, declared)...)
}

// recordWarnings lists the rollout records that name no declared wave or no cluster.
func recordWarnings(r *Repo, declared map[string]bool) Issues {
	var is Issues
	for _, rec := range r.Approvals {
		if !declared[rec.Name] {
			is.Add(rec.Source.At(""), "remove the file: it approves nothing", "%s approves wave %s, which is not declared", rec.Source.File, rec.Name)
		}
	}
	for _, rec := range r.Skips {
		if r.Cluster(rec.Name) == nil {
			is.Add(rec.Source.At(""), "remove the file: it skips nothing", "%s skips cluster %s, which is not in clusters/", rec.Source.File, rec.Name)
		}
	}
	return is
}

// budgetWarnings warns of a failure budget that lets the whole wave (size clusters) fail, and
// of a maxFailures that maxUnavailable always undercuts.
func budgetWarnings(w Wave, size int, src Source, path string) Issues {
	var is Issues
	unavailable, _ := w.Budget()
	if size > 0 && unavailable.Type == intstr.Int && int(unavailable.IntVal) >= size {
		is.Add(src.At(path+".maxUnavailable"), "use a count below the wave's size, or a percentage",
			"wave %s: maxUnavailable %d lets all of its %d clusters fail or stay silent and the rollout go on", w.Name, unavailable.IntVal, size)
	}
	if w.MaxFailures != nil && w.MaxUnavailable != nil && w.MaxFailures.Type == w.MaxUnavailable.Type {
		f, u := intstr.IntOrString(*w.MaxFailures), intstr.IntOrString(*w.MaxUnavailable)
		fv, _ := intstr.GetScaledValueFromIntOrPercent(&f, 100, false)
		uv, _ := intstr.GetScaledValueFromIntOrPercent(&u, 100, false)
		if fv > uv {
			is.Add(src.At(path+".maxFailures"), "failed clusters count as unavailable too: lower maxFailures to maxUnavailable or below, or raise maxUnavailable",
				"wave %s: maxFailures %s is above maxUnavailable %s, so it never applies", w.Name, f.String(), u.String())
		}
	}
	return is
}

// Budget returns the wave's failure budget with its defaults: maxUnavailable 0, maxFailures
// maxUnavailable.
func (w Wave) Budget() (unavailable, failures intstr.IntOrString) {
	unavailable = intstr.FromInt32(0)
	if w.MaxUnavailable != nil {
		unavailable = intstr.IntOrString(*w.MaxUnavailable)
	}
	failures = unavailable
	if w.MaxFailures != nil {
		failures = intstr.IntOrString(*w.MaxFailures)
	}
	return unavailable, failures
}

// FailureAction is a wave's failure action: its own onFailure, else the rollout's
// (spec.rollout.onFailure), else halt.
func (r RolloutSpec) FailureAction(w Wave) string {
	switch {
	case w.OnFailure != "":
		return w.OnFailure
	case r.OnFailure != "":
		return r.OnFailure
	}
	return OnFailureHalt
}

// mergeOf is a wave's merge mode: its own, else spec.pullRequests.merge (defaulted).
func mergeOf(p PlatformSpec, w Wave) string {
	if w.Merge != "" {
		return w.Merge
	}
	if p.PullRequests.Merge == "" {
		return MergeManual
	}
	return p.PullRequests.Merge
}

// HealthDelivery is spec.rollout.health with its default: the github provider.
func (r *Repo) HealthDelivery() HealthSpec {
	var h HealthSpec
	if r != nil && r.Platform != nil {
		h = r.Platform.Spec.Rollout.Health
	}
	if h.Provider == "" {
		h.Provider = HealthGitHub
	}
	return h
}
