package rollout

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/fleetbot-io/fleetbot/internal/pr"
)

// Health events: what Flux's notification-controller posts to fleetbot serve through a
// generic-hmac Provider (spec.rollout.health.provider: generic-hmac). Its Forwarder sends the
// event (github.com/fluxcd/pkg/apis/event/v1beta1 Event) as the JSON body and, in the header
// X-Signature, "sha256=" and the hex HMAC-SHA256 of that body under the Provider Secret's token
// (notification-controller internal/notifier/forwarder.go).
const (
	// HealthSignatureHeader carries the body's signature.
	HealthSignatureHeader = "X-Signature"
	// MaxHealthEventBytes bounds a body: an event's message is at most 39,000 characters
	// (the Event API's limit), and the rest is an object reference and a little metadata.
	MaxHealthEventBytes = 64 << 10
	// maxMetadata bounds an event's metadata entries (Flux sets a handful, an Alert a few).
	maxMetadata = 64
	// maxMetadataBytes bounds one metadata key or value.
	maxMetadataBytes = 4096
)

// MetaCluster is the event metadata key fleetbot's Alerts set to the cluster's name
// (spec.eventMetadata), so every event names where it comes from.
const MetaCluster = "fleetbot.io/cluster"

// FluxNamespace is where a cluster's own Flux objects live, and the namespace of the events a
// cluster's flux-system Provider posts.
const FluxNamespace = "flux-system"

// Errors of ParseHealthEvent: the request is not what a cluster's notification-controller
// sends, and must change nothing.
var (
	// ErrHealthSignature: the signature is missing, malformed, or made with none of the keys.
	ErrHealthSignature = errors.New("health event signature does not verify")
	// ErrHealthEvent: a signed body that is not an event fleetbot accepts from that endpoint.
	ErrHealthEvent = errors.New("invalid health event")
)

// HealthEndpoint is where an event was posted: serve's health URL for a cluster's
// flux-system Provider (<url>/<cluster>), or for one of its workspace namespaces
// (<url>/<cluster>/<namespace>). The keys that verify it are that endpoint's: a workspace
// namespace's key is derived from the cluster's (NamespaceKey), so a tenant, who can read the
// Secret in its namespace, can sign events about its own namespace and nothing else.
type HealthEndpoint struct {
	Cluster string
	// Namespace is the workspace namespace, "" for the cluster's flux-system.
	Namespace string
}

// namespace is the namespace every event posted to the endpoint must be about.
func (at HealthEndpoint) namespace() string {
	if at.Namespace == "" {
		return FluxNamespace
	}
	return at.Namespace
}

// HealthEvent is one verified event: a Kustomization or HelmRelease of a cluster, what it
// reported, and the revision it reported about.
type HealthEvent struct {
	// Cluster and Namespace say where it comes from (the endpoint's; the object's namespace).
	Cluster, Namespace string
	// Kind is Kustomization or HelmRelease, Name the object's name.
	Kind, Name string
	// Severity is info or error: an error is a failure of the object.
	Severity string
	// Reason is the controller's reason (ReconciliationSucceeded, HealthCheckFailed, ...).
	Reason  string
	Message string
	// Revision is the source revision the object reported about (metadata revision, e.g.
	// main@sha1:<commit> for a Kustomization, the chart version for a HelmRelease), "" if none.
	Revision string
	// Time is when the controller recorded it.
	Time time.Time
}

// Failed reports whether the event is a failure (severity error).
func (e HealthEvent) Failed() bool { return e.Severity == eventv1.EventSeverityError }

// watchedKinds are the kinds fleetbot's Alerts send, by the API group of each.
var watchedKinds = map[string]string{
	"Kustomization": "kustomize.toolkit.fluxcd.io",
	"HelmRelease":   "helm.toolkit.fluxcd.io",
}

// ParseHealthEvent verifies and reads one POST of notification-controller's generic-hmac
// Provider: body as received, signature the X-Signature header, keys the endpoint's keys
// (the current one and, while it is rotated, the previous one). It checks, in this order and
// before anything is decoded, the size, the signature's form and the HMAC against every key in
// constant time; then that the body is one event about a Kustomization or HelmRelease in the
// endpoint's namespace, with bounded fields. Every refusal wraps ErrHealthSignature or
// ErrHealthEvent and names no content of the request.
func ParseHealthEvent(body []byte, signature string, keys [][]byte, at HealthEndpoint) (HealthEvent, error) {
	if len(body) > MaxHealthEventBytes {
		return HealthEvent{}, fmt.Errorf("%w: body of %d bytes, more than %d", ErrHealthEvent, len(body), MaxHealthEventBytes)
	}
	if err := verifyHealthSignature(body, signature, keys); err != nil {
		return HealthEvent{}, err
	}
	var ev eventv1.Event
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&ev); err != nil {
		return HealthEvent{}, fmt.Errorf("%w: not an event: %s", ErrHealthEvent, jsonProblem(err))
	}
	if dec.More() {
		return HealthEvent{}, fmt.Errorf("%w: data after the event", ErrHealthEvent)
	}
	return healthEvent(ev, at)
}

// verifyHealthSignature checks signature ("sha256=<hex>") against the body's HMAC-SHA256 under
// every key, each compared in constant time and all of them always, so the time taken says
// nothing about which key (or how much of a signature) matched.
func verifyHealthSignature(body []byte, signature string, keys [][]byte) error {
	hexSig, ok := strings.CutPrefix(signature, "sha256=")
	if !ok || len(hexSig) != 2*sha256.Size {
		return fmt.Errorf("%w: want sha256= and %d hex digits in %s", ErrHealthSignature, 2*sha256.Size, HealthSignatureHeader)
	}
	sig, err := hex.DecodeString(hexSig)
	if err != nil {
		return fmt.Errorf("%w: the signature is not hex", ErrHealthSignature)
	}
	match := false
	usable := 0
	for _, k := range keys {
		if len(k) == 0 {
			continue // an empty key would let anyone sign
		}
		usable++
		m := hmac.New(sha256.New, k)
		m.Write(body)
		match = hmac.Equal(m.Sum(nil), sig) || match
	}
	switch {
	case usable == 0:
		return fmt.Errorf("%w: no key for this endpoint", ErrHealthSignature)
	case !match:
		return fmt.Errorf("%w: made with none of the endpoint's keys", ErrHealthSignature)
	}
	return nil
}

// healthEvent checks a decoded event against the endpoint and bounds its fields.
func healthEvent(ev eventv1.Event, at HealthEndpoint) (HealthEvent, error) {
	obj := ev.InvolvedObject
	bad := func(format string, args ...any) (HealthEvent, error) {
		return HealthEvent{}, fmt.Errorf("%w: "+format, append([]any{ErrHealthEvent}, args...)...)
	}
	group, watched := watchedKinds[obj.Kind]
	switch {
	case !watched:
		return bad("the object is no Kustomization or HelmRelease")
	case obj.APIVersion != "" && !strings.HasPrefix(obj.APIVersion, group+"/"):
		return bad("a %s of another API group than %s", obj.Kind, group)
	case obj.Namespace != at.namespace():
		return bad("the object is not in namespace %s, the one this endpoint reports for", at.namespace())
	case len(validation.IsDNS1123Subdomain(obj.Name)) > 0:
		return bad("the object's name is no Kubernetes name")
	case ev.Severity != eventv1.EventSeverityInfo && ev.Severity != eventv1.EventSeverityError:
		return bad("severity is neither info nor error")
	case ev.Reason == "" || len(ev.Reason) > 1024:
		return bad("the reason is empty or longer than 1024 bytes")
	case len(ev.Message) > 39000:
		return bad("the message is longer than 39000 bytes")
	case ev.Timestamp.IsZero():
		return bad("no timestamp")
	case len(ev.Metadata) > maxMetadata:
		return bad("%d metadata entries, more than %d", len(ev.Metadata), maxMetadata)
	}
	for k, v := range ev.Metadata {
		if len(k) > maxMetadataBytes || len(v) > maxMetadataBytes {
			return bad("a metadata entry is longer than %d bytes", maxMetadataBytes)
		}
	}
	if c, ok := ev.Metadata[MetaCluster]; ok && c != at.Cluster {
		return bad("the Alert names another cluster than the endpoint's %s", at.Cluster)
	}
	revision, _ := ev.GetRevision()
	return HealthEvent{
		Cluster: at.Cluster, Namespace: obj.Namespace, Kind: obj.Kind, Name: obj.Name,
		Severity: ev.Severity, Reason: ev.Reason, Message: ev.Message,
		Revision: revision, Time: ev.Timestamp.UTC(),
	}, nil
}

// jsonProblem says what kind of JSON error err is, without the input's text.
func jsonProblem(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("JSON syntax error at byte %d", syn.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("field %s has the wrong type", typ.Field)
	}
	return "not JSON"
}

// NamespaceKey derives the key of a cluster's workspace namespace from the cluster's key: the
// token of the health Secret fleetbot's Provider in that namespace reads. It is the hex
// HMAC-SHA256 of "fleetbot health namespace <namespace>" under the cluster key, so one secret
// per cluster serves all its namespaces, and a key read from one namespace signs for no other
// and not for flux-system.
func NamespaceKey(clusterKey []byte, namespace string) []byte {
	m := hmac.New(sha256.New, clusterKey)
	m.Write([]byte("fleetbot health namespace " + namespace))
	return []byte(hex.EncodeToString(m.Sum(nil)))
}

// HealthStatusContext is the commit-status context serve records for an event: the one a
// github Provider writes ("kustomization/<name>/<id>", FluxStatusPrefix), so the gate reads
// either the same way. The id, where a Provider puts its UID's first group, is derived from
// the endpoint (8 hex digits), so the contexts of two namespaces never collide.
func HealthStatusContext(at HealthEndpoint, name string) string {
	return FluxStatusPrefix + strings.ToLower(name) + "/" + endpointID(at)
}

// endpointID is the last part of the contexts HealthStatusContext gives an endpoint's events.
func endpointID(at HealthEndpoint) string {
	sum := sha256.Sum256([]byte(at.Cluster + "/" + at.namespace()))
	return hex.EncodeToString(sum[:4])
}

// maxStatusDescription is GitHub's limit on a commit status description (Flux's github
// Provider cuts its description to it too).
const maxStatusDescription = 140

// HelmStatusPrefix starts the context of the commit status notification-controller's own
// commit-status providers give a HelmRelease's event ("helmrelease/<name>/<uid prefix>":
// internal/server/provider_commit_status.go generateDefaultCommitStatus, the kind, name and
// Provider UID's first group, lowercased): the gate counts it as it counts FluxStatusPrefix.
const HelmStatusPrefix = "helmrelease/"

// helmVerdicts are the reasons of a HelmRelease's info events that are a verdict
// (helm-controller api/v2 condition_types.go): its release is in place, or a remediation
// undid it (the install or upgrade failed, and a rollback or uninstall succeeded: the release
// the revision asks for is not running, a failure). Its other info events are progress.
var helmVerdicts = map[string]string{"InstallSucceeded": pr.StatusSuccess, "UpgradeSucceeded": pr.StatusSuccess, "TestSucceeded": pr.StatusSuccess,
	"RollbackSucceeded": pr.StatusFailure, "UninstallSucceeded": pr.StatusFailure}

// CommitStatus is the verdict a verified event records, as a github Provider would post it:
// on the git commit the event names (Commit), with the context of HealthStatusContext (for a
// HelmRelease, HelmStatusPrefix instead of FluxStatusPrefix), failure for an error (and a
// HelmRelease's remediation, helmVerdicts), success once the object reconciled (a
// Kustomization's ReconciliationSucceeded, a HelmRelease's install, upgrade or test
// succeeded), pending for any other progress. ok is false, with why,
// for an event that names no git commit: nothing is recorded for it.
func (e HealthEvent) CommitStatus(at HealthEndpoint) (commit string, st pr.CommitStatus, ok bool, why string) {
	commit = revisionCommit(e.Revision)
	if commit == "" {
		if e.Kind == "HelmRelease" {
			return "", st, false, "a HelmRelease event names its chart version, no git commit: its health counts through the Kustomization that applies it and waits for it (spec.wait)"
		}
		return "", st, false, "the event names no git commit (revision main@sha1:<commit>)"
	}
	ctx, verdict := HealthStatusContext(at, e.Name), ""
	if e.Reason == "ReconciliationSucceeded" {
		verdict = pr.StatusSuccess
	}
	if e.Kind == "HelmRelease" {
		ctx, verdict = HelmStatusPrefix+strings.TrimPrefix(ctx, FluxStatusPrefix), helmVerdicts[e.Reason]
	}
	st = pr.CommitStatus{Context: ctx, CreatedAt: e.Time, Description: description(e), State: verdict}
	switch {
	case e.Failed():
		st.State = pr.StatusFailure
	case verdict == "":
		st.State = pr.StatusPending
	}
	return commit, st, true, ""
}

// revisionCommit is the git commit an event's revision names, by the rule of
// notification-controller's commit-status providers (github included; v1.9.3
// internal/notifier/github.go Post, internal/notifier/util.go parseRevision, over
// github.com/fluxcd/pkg/git utils.go TransformRevision and ExtractHashFromRevision): the part
// after the last ':' ("main@sha1:<commit>", Flux 2.x), else after the last '/'
// ("main/<commit>", before), else the whole revision, which must be a 40-digit SHA-1; "" when
// it names none. The revision is Event.GetRevision's (github.com/fluxcd/pkg/apis/event
// v1beta1 event.go): the metadata commit (an object's event.toolkit.fluxcd.io/commit
// annotation), else originRevision, else revision.
//
// A HelmRelease's event names no commit: helm-controller (v1.6.1 internal/reconcile/release.go
// eventMeta) sets only revision, to the chart version, and no commit or originRevision; even
// with the chart's reconcileStrategy: Revision, the version's "+<commit>" suffix is the first
// 12 hex digits of the source commit (source-controller v1.9.6
// internal/controller/helmchart_controller.go), which parseRevision refuses too.
func revisionCommit(rev string) string {
	c := rev
	if i := strings.LastIndexByte(rev, ':'); i >= 0 {
		c = rev[i+1:]
	} else if i := strings.LastIndexByte(rev, '/'); i >= 0 {
		c = rev[i+1:]
	}
	if len(c) != 40 {
		return ""
	}
	if _, err := hex.DecodeString(c); err != nil {
		return ""
	}
	return strings.ToLower(c)
}

// description is the event's message cut to GitHub's limit at a character boundary, or its
// reason when it has none.
func description(e HealthEvent) string {
	d := e.Message
	if d == "" {
		d = e.Reason
	}
	if len(d) <= maxStatusDescription {
		return d
	}
	cut := maxStatusDescription
	for cut > 0 && !utf8.RuneStart(d[cut]) {
		cut--
	}
	return d[:cut]
}
