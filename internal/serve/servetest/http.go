package servetest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

// Get fetches url and returns the answer's status and body.
func Get(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// Metric returns the value of one series of serve's /metrics at base ("name{labels}" as
// exposed), 0 when serve does not expose it (yet).
func Metric(t testing.TB, base, series string) float64 {
	t.Helper()
	_, body := Get(t, base+"/metrics")
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err, line)
			return f
		}
	}
	return 0
}

// Deliver posts a webhook delivery to serve at base, signed with secret ("" leaves it unsigned),
// and returns the answer's status.
func Deliver(t testing.TB, base, event, id string, body []byte, secret string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/webhook", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", id)
	if secret != "" {
		req.Header.Set("X-Hub-Signature-256", githubtest.Sign(secret, body))
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// JSON encodes v, a delivery's payload.
func JSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// AppliedOK is serve's count of the apply jobs that succeeded.
const AppliedOK = `fleetbot_job_duration_seconds_count{kind="apply",outcome="ok"}`

// Idle reports whether no job waits or runs in serve at base. Jobs leave the in-flight gauge
// after their last log line: wait for it on a Signal fed by serve.Config.AfterJob.
func Idle(t testing.TB, base string) bool {
	t.Helper()
	return Metric(t, base, "fleetbot_queue_depth") == 0 && Metric(t, base, "fleetbot_jobs_in_flight") == 0
}
