package bench

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/ingress"
)

// TestHistogramQuantile: a percentile of serve's ack histogram over the load is the upper
// bound of the bucket holding it, counted from the observations made between two scrapes.
func TestHistogramQuantile(t *testing.T) {
	t.Parallel()
	bounds := []float64{.0001, .001, .005, math.Inf(1)}
	before := histogram{bounds: bounds, counts: []float64{10, 10, 10, 10}}
	after := histogram{bounds: bounds, counts: []float64{100, 195, 209, 210}}
	load := after.sub(before) // 90, 185, 199, 200 of 200
	assert.Equal(t, 100*time.Microsecond, load.quantile(0.45))
	assert.Equal(t, time.Millisecond, load.quantile(0.50))
	assert.Equal(t, 5*time.Millisecond, load.quantile(0.99))
	assert.Equal(t, 10*time.Millisecond, load.quantile(1), "beyond every finite bucket: twice the largest bound")
	assert.Equal(t, time.Duration(0), histogram{bounds: bounds, counts: make([]float64, 4)}.quantile(0.99), "no observation")
}

// TestSendLoad: the sender signs every delivery with the secret, sends each once with its
// event and a delivery id, and answers per delivery in the spec's order; a request that fails
// has status 0.
func TestSendLoad(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	got := map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := ingress.VerifySignature([]byte("s3cret"), body, r.Header.Get(ingress.SignatureHeader)); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		mu.Lock()
		got[r.Header.Get("X-GitHub-Delivery")] = r.Header.Get("X-GitHub-Event") + " " + string(body)
		mu.Unlock()
		if r.Header.Get("X-GitHub-Event") == "refuse" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	spec := LoadSpec{URL: srv.URL, Secret: "s3cret", Rate: 10000, Deliveries: []Delivery{
		{Event: "push", Body: []byte(`{"a":1}`)}, {Event: "refuse", Body: []byte(`{}`)}, {Event: "pull_request", Body: []byte(`{"b":2}`)},
	}}
	res, err := SendLoad(context.Background(), spec)
	require.NoError(t, err)
	assert.Equal(t, []int{http.StatusAccepted, http.StatusServiceUnavailable, http.StatusAccepted}, res.Status)
	assert.Len(t, res.Latency, 3)
	assert.Len(t, res.Lag, 3)
	assert.Equal(t, map[string]string{"load-0": `push {"a":1}`, "load-1": "refuse {}", "load-2": `pull_request {"b":2}`}, got)

	srv.Close()
	res, err = SendLoad(context.Background(), LoadSpec{URL: srv.URL, Secret: "s3cret", Rate: 10000, Deliveries: spec.Deliveries[:1]})
	require.NoError(t, err)
	assert.Equal(t, []int{0}, res.Status, "a request that fails has status 0")

	_, err = SendLoad(context.Background(), LoadSpec{URL: srv.URL})
	assert.ErrorContains(t, err, "load rate 0")
}
