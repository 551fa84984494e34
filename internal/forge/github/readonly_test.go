package github

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"

	gh "github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadOnlyTransport(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("{}")) })
	rt := NewReadOnlyTransport(http.DefaultTransport)

	for _, method := range []string{http.MethodGet, http.MethodHead} {
		resp := s.do(t, rt, method, "/repos/o/r", "")
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, method)
	}
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		req, err := http.NewRequest(method, s.URL+apiPrefix+"/repos/o/r/git/trees", stringsReader("{}"))
		require.NoError(t, err)
		_, err = rt.RoundTrip(req)
		assert.ErrorIs(t, err, ErrReadOnly, method)
		assert.Equal(t, Terminal, Classify(err), method)
	}
	assert.Len(t, s.requests(), 2, "only the reads reach the server")
}

func TestReadOnlyClientBlocksCreateTree(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("no request should reach the server, got %s %s", r.Method, r.URL.Path)
	})
	c, err := New(context.Background(), Config{APIURL: s.apiURL(), Token: "t0ken", ReadOnly: true})
	require.NoError(t, err)
	require.True(t, c.ReadOnly())

	_, _, err = c.API().Git.CreateTree(context.Background(), "acme", "cluster-a", "",
		[]*gh.TreeEntry{{Path: gh.String("README.md"), Mode: gh.String("100644"), Type: gh.String("blob"), Content: gh.String("hi")}})
	require.ErrorIs(t, err, ErrReadOnly)
	assert.NotContains(t, err.Error(), "t0ken")
	assert.Empty(t, s.requests())
	assert.Zero(t, c.Stats().Requests.Writes)
}

// TestReadOnlyTransportGraphQL: a GraphQL query is a read and passes; a mutation, or a
// document hiding one beside a query, is a write and is refused without reaching GitHub.
func TestReadOnlyTransportGraphQL(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil)
	var reached atomic.Int32
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		_, _ = w.Write([]byte(`{"data":{}}`))
	})
	rt := NewReadOnlyTransport(http.DefaultTransport)
	post := func(doc string) (*http.Response, error) {
		body := `{"query":` + strconv.Quote(doc) + `}`
		req, err := http.NewRequest(http.MethodPost, s.URL+apiPrefix+"/graphql", stringsReader(body))
		require.NoError(t, err)
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(stringsReader(body)), nil }
		return rt.RoundTrip(req)
	}
	resp, err := post(`query { viewer { login } }`)
	require.NoError(t, err)
	_ = resp.Body.Close()
	for _, doc := range []string{
		`mutation($id: ID!) { enablePullRequestAutoMerge(input: {pullRequestId: $id}) { clientMutationId } }`,
		`query A { viewer { login } } mutation B { addStar(input: {starrableId: "x"}) { clientMutationId } }`,
		`not graphql at all`,
	} {
		_, err := post(doc)
		assert.ErrorIs(t, err, ErrReadOnly, doc)
	}
	assert.Equal(t, int32(1), reached.Load(), "only the query reached the server")
}

// TestGraphQLBodyClassifiedOnce: the transports of a client (read-only, retry, write budget,
// read limit, counting) each ask whether a GraphQL request only reads; its body is decoded and
// parsed once for all of them, and the answer is still right for a query and a mutation.
func TestGraphQLBodyClassifiedOnce(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"data":{}}`))
	})
	counters := NewCounters()
	chain := func(readOnly bool) http.RoundTripper {
		var rt http.RoundTripper = NewCountingTransport(http.DefaultTransport, counters)
		rt = NewReadLimitTransport(rt, 2)
		rt = NewBudgetTransport(rt, NewBudget(BudgetConfig{MinInterval: -1}))
		rt = NewRetryTransport(rt, RetryConfig{})
		if readOnly {
			rt = NewReadOnlyTransport(rt)
		}
		return rt
	}
	post := func(rt http.RoundTripper, doc string) (int, error) {
		body := `{"query":` + strconv.Quote(doc) + `}`
		req, err := http.NewRequest(http.MethodPost, s.URL+apiPrefix+"/graphql", stringsReader(body))
		require.NoError(t, err)
		var reads atomic.Int32
		req.GetBody = func() (io.ReadCloser, error) {
			reads.Add(1)
			return io.NopCloser(stringsReader(body)), nil
		}
		resp, err := rt.RoundTrip(req)
		if resp != nil {
			_ = resp.Body.Close()
		}
		return int(reads.Load()), err
	}
	reads, err := post(chain(true), `query { viewer { login } }`)
	require.NoError(t, err)
	assert.Equal(t, 1, reads, "one decode for five transports")
	reads, err = post(chain(false), `mutation($id: ID!) { enablePullRequestAutoMerge(input: {pullRequestId: $id}) { clientMutationId } }`)
	require.NoError(t, err)
	assert.Equal(t, 1, reads)
	_, err = post(chain(true), `mutation($id: ID!) { enablePullRequestAutoMerge(input: {pullRequestId: $id}) { clientMutationId } }`)
	assert.ErrorIs(t, err, ErrReadOnly)
	st := counters.Stats()
	assert.Equal(t, int64(1), st.Reads, "the query counted as a read")
	assert.Equal(t, int64(1), st.Writes, "the mutation as a write")

	// On top of a client's chain, ClassifyTransport parses each query text once, and its
	// remembered verdict is the parsed one: a mutation sent again is still refused read-only.
	ct := NewClassifyTransport(chain(true))
	mutation := `mutation($id: ID!) { enablePullRequestAutoMerge(input: {pullRequestId: $id}) { clientMutationId } }`
	for range 2 {
		_, err = post(ct, `query { viewer { login } }`)
		require.NoError(t, err)
		_, err = post(ct, mutation)
		assert.ErrorIs(t, err, ErrReadOnly)
	}
	assert.Equal(t, 2, ct.queries.Len(), "two texts, parsed once each")
	st = counters.Stats()
	assert.Equal(t, int64(3), st.Reads, "two more reads")
	assert.Equal(t, int64(1), st.Writes, "no write passed the read-only guard")
}
