package github

import (
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestKindOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		method, path string
		want         kind
	}{
		{"GET", "/api/v3/repos/o/r/git/trees/abc", kindRead},
		{"HEAD", "/repos/o/r", kindRead},
		{"POST", "/api/v3/repos/o/r/git/trees", kindContent},
		{"POST", "/repos/o/r/git/blobs", kindContent},
		{"POST", "/repos/o/r/git/commits", kindContent},
		{"POST", "/repos/o/r/git/refs", kindContent},
		{"PATCH", "/repos/o/r/git/refs/heads/fleetbot/sync", kindContent},
		{"DELETE", "/repos/o/r/git/refs/heads/fleetbot/sync", kindWrite},
		{"POST", "/repos/o/r/pulls", kindContent},
		{"PATCH", "/repos/o/r/pulls/3", kindWrite},
		{"POST", "/repos/o/r/issues/3/comments", kindContent},
		{"POST", "/repos/o/r/issues/3/labels", kindWrite},
		{"POST", "/orgs/acme/repos", kindContent},
		{"POST", "/user/repos", kindContent},
		{"PUT", "/repos/o/r/contents/a/b.yaml", kindContent},
		{"PUT", "/repos/o/r/branches/main/protection", kindWrite},
		{"PUT", "/orgs/acme/teams/t/repos/o/r", kindWrite},
	} {
		req, _ := http.NewRequest(tc.method, "https://example.com"+tc.path, nil)
		assert.Equal(t, tc.want, kindOf(req), "%s %s", tc.method, tc.path)
	}
}

func TestCountingTransport(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-RateLimit-Remaining", "4999")
		w.Header().Set("X-RateLimit-Reset", "1800000000")
		if r.Header.Get("If-None-Match") != "" {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusCreated)
		}
	})
	c := NewCounters()
	rt := NewCountingTransport(http.DefaultTransport, c)
	s.do(t, rt, "GET", "/repos/o/r", "").Body.Close()
	req, _ := http.NewRequest("GET", s.URL+apiPrefix+"/repos/o/r", nil)
	req.Header.Set("If-None-Match", `"x"`)
	resp, err := rt.RoundTrip(req)
	assert.NoError(t, err)
	resp.Body.Close()
	s.do(t, rt, "POST", "/repos/o/r/git/trees", "{}").Body.Close()
	s.do(t, rt, "DELETE", "/repos/o/r/git/refs/heads/x", "").Body.Close()

	st := c.Stats()
	assert.Equal(t, int64(2), st.Reads)
	assert.Equal(t, int64(2), st.Writes)
	assert.Equal(t, int64(1), st.ContentWrites)
	assert.Equal(t, int64(1), st.NotModified)
	assert.Equal(t, map[int]int64{200: 2, 201: 1, 304: 1}, st.ByStatus)
	assert.Equal(t, int64(4999), st.RateRemaining)
	assert.Equal(t, time.Unix(1800000000, 0), st.RateReset)
}

func TestReadLimitTransport(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil)
	var fl inFlight
	release := make(chan struct{})
	arrived := make(chan struct{}, 100)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fl.enter()
		defer fl.leave()
		arrived <- struct{}{}
		<-release
	})
	rt := NewReadLimitTransport(http.DefaultTransport, 3)
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() { s.do(t, rt, "GET", "/repos/o/r"+strconv.Itoa(i), "").Body.Close() })
	}
	for range 3 {
		<-arrived
	}
	time.Sleep(50 * time.Millisecond) // give a fourth request the chance to (wrongly) arrive
	assert.Equal(t, int64(3), fl.cur.Load(), "reads in flight")
	close(release)
	wg.Wait()
	assert.Equal(t, int64(3), fl.max.Load(), "max reads in flight")
	assert.Len(t, s.requests(), 12)
}
