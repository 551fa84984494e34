package github

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// etagHandler serves body with a fixed ETag and answers If-None-Match with 304.
func etagHandler(etag, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", etag)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-RateLimit-Remaining", "4000")
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		_, _ = io.WriteString(w, body)
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

func TestCacheTransportETag(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil)
	s.mux.Handle("/repos/o/r", etagHandler(`"v1"`, `{"name":"r"}`))
	ct := NewCacheTransport(http.DefaultTransport, "token:a", 0, 0)

	first := s.do(t, ct, "GET", "/repos/o/r", "")
	assert.Equal(t, `{"name":"r"}`, readAll(t, first))
	assert.Empty(t, first.Header.Get("X-From-Cache"))

	second := s.do(t, ct, "GET", "/repos/o/r", "")
	assert.Equal(t, http.StatusOK, second.StatusCode, "a 304 is returned as 200")
	assert.Equal(t, "1", second.Header.Get("X-From-Cache"))
	assert.Equal(t, "application/json", second.Header.Get("Content-Type"))
	assert.Equal(t, `{"name":"r"}`, readAll(t, second))

	reqs := s.requests()
	require.Len(t, reqs, 2)
	assert.Empty(t, reqs[0].Header.Get("If-None-Match"))
	assert.Equal(t, `"v1"`, reqs[1].Header.Get("If-None-Match"))
	assert.Equal(t, CacheStats{Entries: 1, Bytes: ct.Stats().Bytes, Hits: 1, Misses: 1}, ct.Stats())
}

func TestCacheTransportChangedBodyReplacesEntry(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil)
	version := "v1"
	var mu sync.Mutex
	s.mux.HandleFunc("/repos/o/r/git/ref/heads/main", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		v := version
		mu.Unlock()
		etagHandler(`"`+v+`"`, `{"sha":"`+v+`"}`)(w, r)
	})
	ct := NewCacheTransport(http.DefaultTransport, "token:a", 0, 0)
	assert.Equal(t, `{"sha":"v1"}`, readAll(t, s.do(t, ct, "GET", "/repos/o/r/git/ref/heads/main", "")))
	mu.Lock()
	version = "v2"
	mu.Unlock()
	assert.Equal(t, `{"sha":"v2"}`, readAll(t, s.do(t, ct, "GET", "/repos/o/r/git/ref/heads/main", "")))
	third := s.do(t, ct, "GET", "/repos/o/r/git/ref/heads/main", "")
	assert.Equal(t, "1", third.Header.Get("X-From-Cache"))
	assert.Equal(t, `{"sha":"v2"}`, readAll(t, third))
}

func TestCacheTransportKeysByIdentityAndAccept(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil)
	s.mux.Handle("/repos/o/r", etagHandler(`"v1"`, `{}`))
	a := NewCacheTransport(http.DefaultTransport, "installation:1", 0, 0)
	b := NewCacheTransport(http.DefaultTransport, "installation:2", 0, 0)
	_ = readAll(t, s.do(t, a, "GET", "/repos/o/r", ""))
	_ = readAll(t, s.do(t, b, "GET", "/repos/o/r", ""))

	req, _ := http.NewRequest("GET", s.URL+apiPrefix+"/repos/o/r", nil)
	req.Header.Set("Accept", "application/vnd.github.raw")
	resp, err := a.RoundTrip(req)
	require.NoError(t, err)
	_ = readAll(t, resp)
	for i, r := range s.requests() {
		assert.Empty(t, r.Header.Get("If-None-Match"), "request %d has no validator: new identity or Accept", i)
	}
}

func TestCacheTransportBounds(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil)
	for i := range 5 {
		s.mux.Handle(fmt.Sprintf("/r/%d", i), etagHandler(fmt.Sprintf(`"%d"`, i), fmt.Sprintf(`{"n":%d}`, i)))
	}
	s.mux.Handle("/big", etagHandler(`"big"`, string(make([]byte, 5000))))
	ct := NewCacheTransport(http.DefaultTransport, "x", 3, 4096)
	for i := range 5 {
		_ = readAll(t, s.do(t, ct, "GET", fmt.Sprintf("/r/%d", i), ""))
	}
	assert.Equal(t, 3, ct.Stats().Entries, "bounded by count")
	assert.LessOrEqual(t, ct.Stats().Bytes, int64(4096))

	// /r/0 was evicted (least recently used): no validator sent; /r/4 is still cached.
	_ = readAll(t, s.do(t, ct, "GET", "/r/0", ""))
	_ = readAll(t, s.do(t, ct, "GET", "/r/4", ""))
	reqs := s.requests()
	assert.Empty(t, reqs[5].Header.Get("If-None-Match"))
	assert.Equal(t, `"4"`, reqs[6].Header.Get("If-None-Match"))

	big := s.do(t, ct, "GET", "/big", "")
	assert.Len(t, readAll(t, big), 5000, "an over-size body is still returned whole")
	assert.LessOrEqual(t, ct.Stats().Bytes, int64(4096), "but not cached")
}

func TestCacheTransportSkipsNonGETAndExplicitConditionals(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil)
	s.mux.Handle("/repos/o/r", etagHandler(`"v1"`, `{}`))
	ct := NewCacheTransport(http.DefaultTransport, "x", 0, 0)
	_ = readAll(t, s.do(t, ct, "POST", "/repos/o/r", "{}"))
	assert.Zero(t, ct.Stats().Entries)

	req, _ := http.NewRequest("GET", s.URL+apiPrefix+"/repos/o/r", nil)
	req.Header.Set("If-None-Match", `"v1"`)
	resp, err := ct.RoundTrip(req)
	require.NoError(t, err)
	_ = readAll(t, resp)
	assert.Equal(t, http.StatusNotModified, resp.StatusCode, "the caller's own conditional request is left alone")
}

func TestCacheTransportConcurrent(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil)
	for i := range 20 {
		s.mux.Handle(fmt.Sprintf("/r/%d", i), etagHandler(fmt.Sprintf(`"%d"`, i), fmt.Sprintf(`{"n":%d}`, i)))
	}
	ct := NewCacheTransport(http.DefaultTransport, "x", 8, 0)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 40 {
				n := (g + i) % 20
				req, _ := http.NewRequestWithContext(context.Background(), "GET", fmt.Sprintf("%s%s/r/%d", s.URL, apiPrefix, n), nil)
				resp, err := ct.RoundTrip(req)
				if assert.NoError(t, err) {
					assert.Equal(t, fmt.Sprintf(`{"n":%d}`, n), readAll(t, resp))
				}
			}
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, ct.Stats().Entries, 8)
}
