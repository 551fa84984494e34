package github

import (
	"bytes"
	"container/list"
	"io"
	"net/http"
	"strconv"
	"sync"
)

// Defaults for the ETag cache bounds.
const (
	DefaultCacheEntries = 4096
	DefaultCacheBytes   = 32 << 20
)

// CacheStats is a snapshot of a CacheTransport.
type CacheStats struct {
	// Entries and Bytes are the cache's current size.
	Entries int
	Bytes   int64
	// Hits are GETs answered 304 and served from the cache; Misses are GETs sent without a
	// validator or answered with a new body.
	Hits, Misses int64
}

// CacheTransport makes GETs conditional. It remembers ETag/Last-Modified and the body per URL
// (and Accept header and auth identity), sends If-None-Match/If-Modified-Since, and turns a 304
// into the cached 200 with header X-From-Cache: 1 — GitHub does not count 304s against the
// rate limit, which is what makes a no-op reconcile of thousands of repos cheap
// (https://docs.github.com/en/rest/using-the-rest-api/best-practices-for-using-the-rest-api#use-conditional-requests-if-appropriate).
// The cache is an LRU bounded by entry count and bytes, and safe for concurrent use.
type CacheTransport struct {
	next       http.RoundTripper
	identity   string
	maxEntries int
	maxBytes   int64

	mu     sync.Mutex
	lru    *list.List // of *cacheEntry, most recent first
	byKey  map[string]*list.Element
	bytes  int64
	hits   int64
	misses int64
}

type cacheEntry struct {
	key          string
	etag         string
	lastModified string
	header       http.Header
	body         []byte
}

func (e *cacheEntry) size() int64 { return int64(len(e.key) + len(e.body) + 256) }

// NewCacheTransport returns a CacheTransport. identity names whose view the responses are
// (e.g. "installation:42"): responses are never shared across identities. maxEntries and
// maxBytes <= 0 take DefaultCacheEntries and DefaultCacheBytes.
func NewCacheTransport(next http.RoundTripper, identity string, maxEntries int, maxBytes int64) *CacheTransport {
	if maxEntries <= 0 {
		maxEntries = DefaultCacheEntries
	}
	if maxBytes <= 0 {
		maxBytes = DefaultCacheBytes
	}
	return &CacheTransport{
		next: next, identity: identity, maxEntries: maxEntries, maxBytes: maxBytes,
		lru: list.New(), byKey: map[string]*list.Element{},
	}
}

// Stats returns a snapshot.
func (t *CacheTransport) Stats() CacheStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return CacheStats{Entries: t.lru.Len(), Bytes: t.bytes, Hits: t.hits, Misses: t.misses}
}

// RoundTrip implements http.RoundTripper.
func (t *CacheTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || req.Header.Get("If-None-Match") != "" ||
		req.Header.Get("If-Modified-Since") != "" || req.Header.Get("Range") != "" {
		return t.next.RoundTrip(req)
	}
	key := t.identity + "\n" + req.Header.Get("Accept") + "\n" + req.URL.String()
	e := t.get(key)
	out := req
	if e != nil {
		out = req.Clone(req.Context())
		if e.etag != "" {
			out.Header.Set("If-None-Match", e.etag)
		} else {
			out.Header.Set("If-Modified-Since", e.lastModified)
		}
	}
	resp, err := t.next.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode == http.StatusNotModified && e != nil:
		t.count(true)
		discard(resp)
		return e.response(req, resp), nil
	case resp.StatusCode == http.StatusOK:
		t.count(false)
		return t.store(key, resp), nil
	default:
		return resp, nil
	}
}

func (t *CacheTransport) count(hit bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if hit {
		t.hits++
	} else {
		t.misses++
	}
}

// store remembers a 200 that carries a validator, returning the response with a body the caller
// can still read.
func (t *CacheTransport) store(key string, resp *http.Response) *http.Response {
	etag, lm := resp.Header.Get("ETag"), resp.Header.Get("Last-Modified")
	if (etag == "" && lm == "") || resp.Header.Get("Cache-Control") == "no-store" {
		t.remove(key)
		return resp
	}
	orig := resp.Body
	data, err := io.ReadAll(io.LimitReader(orig, t.maxBytes+1))
	if err != nil || int64(len(data)) > t.maxBytes {
		// Too big (or broken): hand back what was read followed by the rest, uncached.
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(data), orig), orig}
		t.remove(key)
		return resp
	}
	_ = orig.Close()
	resp.Body = io.NopCloser(bytes.NewReader(data))
	t.put(&cacheEntry{key: key, etag: etag, lastModified: lm, header: resp.Header.Clone(), body: data})
	return resp
}

// response rebuilds the cached 200 for req, refreshed with the 304's headers (rate limit, date).
func (e *cacheEntry) response(req *http.Request, notModified *http.Response) *http.Response {
	h := e.header.Clone()
	for k, v := range notModified.Header {
		h[k] = v
	}
	h.Set("X-From-Cache", "1")
	h.Set("Content-Length", strconv.Itoa(len(e.body)))
	return &http.Response{
		Status:        "200 OK",
		StatusCode:    http.StatusOK,
		Proto:         notModified.Proto,
		ProtoMajor:    notModified.ProtoMajor,
		ProtoMinor:    notModified.ProtoMinor,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(e.body)),
		ContentLength: int64(len(e.body)),
		Request:       req,
		TLS:           notModified.TLS,
	}
}

func (t *CacheTransport) get(key string) *cacheEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	el, ok := t.byKey[key]
	if !ok {
		return nil
	}
	t.lru.MoveToFront(el)
	return el.Value.(*cacheEntry)
}

func (t *CacheTransport) put(e *cacheEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.removeLocked(e.key)
	t.byKey[e.key] = t.lru.PushFront(e)
	t.bytes += e.size()
	for t.lru.Len() > 0 && (t.lru.Len() > t.maxEntries || t.bytes > t.maxBytes) {
		t.removeLocked(t.lru.Back().Value.(*cacheEntry).key)
	}
}

func (t *CacheTransport) remove(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.removeLocked(key)
}

func (t *CacheTransport) removeLocked(key string) {
	if el, ok := t.byKey[key]; ok {
		t.lru.Remove(el)
		delete(t.byKey, key)
		t.bytes -= el.Value.(*cacheEntry).size()
	}
}
