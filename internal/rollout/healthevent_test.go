package rollout

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	clusterKey = []byte("a cluster key, as the Secret's token")
	oldKey     = []byte("the key before the rotation")
	flux       = HealthEndpoint{Cluster: "prod-eu-1"}
	tenant     = HealthEndpoint{Cluster: "prod-eu-1", Namespace: "payments"}
)

// sign signs a body as notification-controller's Forwarder does
// (internal/notifier/forwarder.go: "sha256=" + fmt.Sprintf("%x", HMAC-SHA256(key, body))).
func sign(body, key []byte) string {
	h := hmac.New(sha256.New, key)
	h.Write(body)
	return fmt.Sprintf("sha256=%x", h.Sum(nil))
}

// kustomizationEvent is an event as kustomize-controller records it and notification-controller
// forwards it (metadata combined: the Alert's eventMetadata, the object's group prefix dropped).
func kustomizationEvent(ns, name, severity string) eventv1.Event {
	return eventv1.Event{
		InvolvedObject: corev1.ObjectReference{Kind: "Kustomization", Namespace: ns, Name: name,
			APIVersion: "kustomize.toolkit.fluxcd.io/v1", UID: "0d6e0b6c-3b8e-4b52-9d1c-2f0c8e3c1a11"},
		Severity:  severity,
		Timestamp: metav1.NewTime(time.Date(2026, 11, 25, 9, 30, 0, 0, time.UTC)),
		Message:   "Health check failed after 30s: timeout waiting for: [Deployment/payments/api status: 'InProgress']",
		Reason:    "HealthCheckFailed",
		Metadata: map[string]string{
			"revision":  "main@sha1:4f1c2e8b9a7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b",
			MetaCluster: "prod-eu-1",
		},
		ReportingController: "kustomize-controller",
		ReportingInstance:   "kustomize-controller-7d9f8b6c5-x2x9z",
	}
}

func body(t testing.TB, ev eventv1.Event) []byte {
	t.Helper()
	b, err := json.Marshal(ev) // what notification-controller posts and signs
	require.NoError(t, err)
	return b
}

// TestParseHealthEvent: a signed event of a cluster's Kustomization reads as its cluster,
// object, verdict, reason and revision; a tenant namespace's event verifies with the key
// derived for that namespace.
func TestParseHealthEvent(t *testing.T) {
	b := body(t, kustomizationEvent("flux-system", "platform-monitoring", "error"))
	ev, err := ParseHealthEvent(b, sign(b, clusterKey), [][]byte{clusterKey}, flux)
	require.NoError(t, err)
	assert.Equal(t, HealthEvent{
		Cluster: "prod-eu-1", Namespace: "flux-system", Kind: "Kustomization", Name: "platform-monitoring",
		Severity: "error", Reason: "HealthCheckFailed",
		Message:  "Health check failed after 30s: timeout waiting for: [Deployment/payments/api status: 'InProgress']",
		Revision: "main@sha1:4f1c2e8b9a7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b",
		Time:     time.Date(2026, 11, 25, 9, 30, 0, 0, time.UTC),
	}, ev)
	assert.True(t, ev.Failed())

	hr := kustomizationEvent("payments", "podinfo", "info")
	hr.InvolvedObject.Kind, hr.InvolvedObject.APIVersion = "HelmRelease", "helm.toolkit.fluxcd.io/v2"
	hr.Reason, hr.Metadata = "UpgradeSucceeded", map[string]string{"revision": "6.7.1", MetaCluster: "prod-eu-1"}
	b = body(t, hr)
	nsKey := NamespaceKey(clusterKey, "payments")
	ev, err = ParseHealthEvent(b, sign(b, nsKey), [][]byte{nsKey}, tenant)
	require.NoError(t, err)
	assert.Equal(t, "HelmRelease", ev.Kind)
	assert.Equal(t, "payments", ev.Namespace)
	assert.Equal(t, "6.7.1", ev.Revision)
	assert.False(t, ev.Failed())
}

// TestParseHealthEventKeys: the signature verifies under the current key or, during a
// rotation, the previous one; under no other key, nor a tenant's key at the cluster's
// endpoint; an empty key signs nothing.
func TestParseHealthEventKeys(t *testing.T) {
	b := body(t, kustomizationEvent("flux-system", "apps", "info"))
	rotating := [][]byte{clusterKey, oldKey}
	_, err := ParseHealthEvent(b, sign(b, oldKey), rotating, flux)
	assert.NoError(t, err, "signed with the previous key during a rotation")
	_, err = ParseHealthEvent(b, sign(b, clusterKey), rotating, flux)
	assert.NoError(t, err)
	_, err = ParseHealthEvent(b, sign(b, oldKey), [][]byte{clusterKey}, flux)
	assert.ErrorIs(t, err, ErrHealthSignature, "after the rotation the old key is refused")
	_, err = ParseHealthEvent(b, sign(b, NamespaceKey(clusterKey, "payments")), [][]byte{clusterKey}, flux)
	assert.ErrorIs(t, err, ErrHealthSignature, "a tenant's key does not sign for flux-system")
	_, err = ParseHealthEvent(b, sign(b, nil), [][]byte{{}}, flux)
	assert.ErrorIs(t, err, ErrHealthSignature, "an empty key verifies nothing")
	_, err = ParseHealthEvent(b, sign(b, clusterKey), nil, flux)
	assert.ErrorIs(t, err, ErrHealthSignature)
	assert.NotEqual(t, NamespaceKey(clusterKey, "payments"), NamespaceKey(clusterKey, "orders"))
	assert.NotEqual(t, NamespaceKey(clusterKey, "payments"), NamespaceKey(oldKey, "payments"))
}

// TestParseHealthEventRefuses: every request that is not a signed event of the endpoint's
// namespace is refused with the class of its problem, and the error repeats none of the
// request's content.
func TestParseHealthEventRefuses(t *testing.T) {
	good := kustomizationEvent("flux-system", "apps", "info")
	signed := func(ev eventv1.Event) ([]byte, string) {
		b := body(t, ev)
		return b, sign(b, clusterKey)
	}
	with := func(change func(*eventv1.Event)) eventv1.Event {
		ev := good
		ev.Metadata = map[string]string{}
		for k, v := range good.Metadata {
			ev.Metadata[k] = v
		}
		change(&ev)
		return ev
	}
	b, s := signed(good)
	tampered := []byte(strings.Replace(string(b), `"info"`, `"error"`, 1))
	big := make([]byte, MaxHealthEventBytes+1)
	for name, tc := range map[string]struct {
		body []byte
		sig  string
		at   HealthEndpoint
		want error
	}{
		"no signature":           {b, "", flux, ErrHealthSignature},
		"another algorithm":      {b, strings.Replace(s, "sha256=", "sha1=", 1), flux, ErrHealthSignature},
		"a short signature":      {b, s[:len(s)-2], flux, ErrHealthSignature},
		"a signature not hex":    {b, "sha256=" + strings.Repeat("zz", 32), flux, ErrHealthSignature},
		"a tampered body":        {tampered, s, flux, ErrHealthSignature},
		"too big":                {big, sign(big, clusterKey), flux, ErrHealthEvent},
		"not JSON":               {[]byte("<event/>"), sign([]byte("<event/>"), clusterKey), flux, ErrHealthEvent},
		"two events":             {append(b, b...), sign(append(b, b...), clusterKey), flux, ErrHealthEvent},
		"the wrong namespace":    {b, s, HealthEndpoint{Cluster: "prod-eu-1", Namespace: "payments"}, ErrHealthEvent},
		"a GitRepository":        {nil, "", flux, ErrHealthEvent},
		"another API group":      {nil, "", flux, ErrHealthEvent},
		"a trace":                {nil, "", flux, ErrHealthEvent},
		"no reason":              {nil, "", flux, ErrHealthEvent},
		"no timestamp":           {nil, "", flux, ErrHealthEvent},
		"a name that is no name": {nil, "", flux, ErrHealthEvent},
		"another cluster":        {nil, "", flux, ErrHealthEvent},
		"too much metadata":      {nil, "", flux, ErrHealthEvent},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.body == nil {
				ev := with(map[string]func(*eventv1.Event){
					"a GitRepository":        func(e *eventv1.Event) { e.InvolvedObject.Kind = "GitRepository" },
					"another API group":      func(e *eventv1.Event) { e.InvolvedObject.APIVersion = "example.com/v1" },
					"a trace":                func(e *eventv1.Event) { e.Severity = "trace" },
					"no reason":              func(e *eventv1.Event) { e.Reason = "" },
					"no timestamp":           func(e *eventv1.Event) { e.Timestamp = metav1.Time{} },
					"a name that is no name": func(e *eventv1.Event) { e.InvolvedObject.Name = "../../etc" },
					"another cluster":        func(e *eventv1.Event) { e.Metadata[MetaCluster] = "prod-us-1" },
					"too much metadata": func(e *eventv1.Event) {
						for i := range maxMetadata + 1 {
							e.Metadata[fmt.Sprint("k", i)] = "v"
						}
					},
				}[name])
				tc.body, tc.sig = signed(ev)
			}
			_, err := ParseHealthEvent(tc.body, tc.sig, [][]byte{clusterKey}, tc.at)
			require.ErrorIs(t, err, tc.want)
			assert.NotContains(t, err.Error(), "platform", "the error names nothing of the request")
			assert.NotContains(t, err.Error(), "../")
		})
	}
}

// FuzzParseHealthEvent: no input makes the parser panic; an event it accepts verified under
// the key and is about the endpoint's namespace, with bounded fields. With sign set the body
// is signed with the key, so the fuzzer reaches the decoding past the signature.
func FuzzParseHealthEvent(f *testing.F) {
	good := body(f, kustomizationEvent("flux-system", "platform-monitoring", "error"))
	f.Add(good, sign(good, clusterKey), false)
	f.Add(good, "", true)
	f.Add([]byte(`{"involvedObject":{"kind":"HelmRelease","namespace":"flux-system","name":"x"},"severity":"info","reason":"R","timestamp":"2026-11-25T09:30:00Z"}`), "", true)
	f.Add([]byte(`{}`), "sha256=00", false)
	f.Fuzz(func(t *testing.T, body []byte, sig string, signIt bool) {
		if signIt {
			sig = sign(body, clusterKey)
		}
		ev, err := ParseHealthEvent(body, sig, [][]byte{clusterKey, oldKey}, flux)
		if err != nil {
			if !strings.Contains(err.Error(), ErrHealthSignature.Error()) && !strings.Contains(err.Error(), ErrHealthEvent.Error()) {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		if verifyHealthSignature(body, sig, [][]byte{clusterKey, oldKey}) != nil {
			t.Fatal("accepted an event whose signature does not verify")
		}
		if ev.Namespace != FluxNamespace || ev.Cluster != flux.Cluster || (ev.Kind != "Kustomization" && ev.Kind != "HelmRelease") {
			t.Fatalf("accepted an event of another object: %+v", ev)
		}
		if len(ev.Reason) > 1024 || len(ev.Message) > 39000 || len(ev.Revision) > maxMetadataBytes || len(ev.Name) > 253 {
			t.Fatal("accepted an unbounded field")
		}
	})
}

// TestHealthEventCommitStatus: a Kustomization's event becomes the commit status a github
// Provider would post on the commit its revision names; one without a git commit records
// nothing.
func TestHealthEventCommitStatus(t *testing.T) {
	t.Parallel()
	at := HealthEndpoint{Cluster: "c1"}
	sha := strings.Repeat("ab", 20)
	ev := HealthEvent{Cluster: "c1", Namespace: "flux-system", Kind: "Kustomization", Name: "Apps", Severity: "error",
		Reason: "HealthCheckFailed", Message: strings.Repeat("é", 100), Revision: "main@sha1:" + sha}
	commit, st, ok, _ := ev.CommitStatus(at)
	require.True(t, ok)
	assert.Equal(t, sha, commit)
	assert.Equal(t, "failure", st.State)
	assert.True(t, strings.HasPrefix(st.Context, "kustomization/apps/"))
	assert.LessOrEqual(t, len(st.Description), 140)
	assert.True(t, utf8.ValidString(st.Description), "cut at a character boundary")
	assert.NotEqual(t, st.Context, HealthStatusContext(HealthEndpoint{Cluster: "c1", Namespace: "payments"}, "apps"), "namespaces do not collide")

	ev.Severity, ev.Reason = "info", "ReconciliationSucceeded"
	_, st, _, _ = ev.CommitStatus(at)
	assert.Equal(t, "success", st.State)
	ev.Reason = "Progressing"
	_, st, _, _ = ev.CommitStatus(at)
	assert.Equal(t, "pending", st.State)
	for _, rev := range []string{"main/" + sha, "sha1:" + sha, sha, "refs/heads/main@sha1:" + sha} {
		ev.Revision = rev
		commit, _, ok, _ = ev.CommitStatus(at)
		assert.True(t, ok, "notification-controller's parseRevision takes %s", rev)
		assert.Equal(t, sha, commit)
	}

	for _, rev := range []string{"", "6.1.0", "main@sha256:" + strings.Repeat("a", 64), "main@sha1:xyz", "main@sha1:" + sha[:12]} {
		ev.Revision = rev
		_, _, ok, why := ev.CommitStatus(at)
		assert.False(t, ok, rev)
		assert.Contains(t, why, "no git commit")
	}
}

// TestHelmReleaseEventCommit: a HelmRelease's event names a commit only as notification-
// controller's github provider would find one (the metadata commit, from the object's
// event.toolkit.fluxcd.io/commit annotation, which Event.GetRevision prefers to the chart
// version): then its verdict is recorded under helmrelease/<name>/<id>, which the gate counts.
// Its usual events name the chart version only, even "+<12 hex digits>" of a chart built from
// git with reconcileStrategy: Revision: nothing is recorded, and why says where its health
// counts instead.
func TestHelmReleaseEventCommit(t *testing.T) {
	t.Parallel()
	sha := "4f1c2e8b9a7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b"
	hr := kustomizationEvent("payments", "podinfo", "error")
	hr.InvolvedObject.Kind, hr.InvolvedObject.APIVersion = "HelmRelease", "helm.toolkit.fluxcd.io/v2"
	hr.Reason, hr.Message = "UpgradeFailed", "Helm upgrade failed for release payments/podinfo: context deadline exceeded"
	nsKey := NamespaceKey(clusterKey, "payments")
	parse := func(md map[string]string) HealthEvent {
		t.Helper()
		hr.Metadata = md
		b := body(t, hr)
		ev, err := ParseHealthEvent(b, sign(b, nsKey), [][]byte{nsKey}, tenant)
		require.NoError(t, err)
		return ev
	}

	for _, version := range []string{"6.7.1", "0.1.0+" + sha[:12]} {
		ev := parse(map[string]string{"revision": version, MetaCluster: "prod-eu-1"})
		_, _, ok, why := ev.CommitStatus(tenant)
		assert.False(t, ok, version)
		assert.Contains(t, why, "chart version")
		assert.Contains(t, why, "spec.wait")
	}

	ev := parse(map[string]string{"revision": "6.7.1", "commit": sha, MetaCluster: "prod-eu-1"})
	commit, st, ok, _ := ev.CommitStatus(tenant)
	require.True(t, ok, "the metadata commit names it")
	assert.Equal(t, sha, commit)
	assert.Equal(t, "failure", st.State)
	assert.True(t, strings.HasPrefix(st.Context, HelmStatusPrefix+"podinfo/"), st.Context)
	assert.True(t, strings.HasSuffix(st.Context, strings.TrimPrefix(HealthStatusContext(tenant, "podinfo"), FluxStatusPrefix+"podinfo")), "the endpoint's id")

	ev.Severity, ev.Reason = "info", "UpgradeSucceeded"
	_, st, _, _ = ev.CommitStatus(tenant)
	assert.Equal(t, "success", st.State)
	ev.Reason = "RollbackSucceeded" // a remediation: the upgrade failed, the release is undone
	_, st, _, _ = ev.CommitStatus(tenant)
	assert.Equal(t, "failure", st.State)
	ev.Reason = "DriftDetected"
	_, st, _, _ = ev.CommitStatus(tenant)
	assert.Equal(t, "pending", st.State)
}
