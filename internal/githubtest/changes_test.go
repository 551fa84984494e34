package githubtest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

// TestChangedSignalsWritesNotReads: a test waiting on the fake wakes on what changes it (a write
// answered, a webhook delivered, the clock advanced), each signalled before the writer hears back,
// and not on a read, so that a condition reading through the API does not wake itself.
func TestChangedSignalsWritesNotReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t)
	srv.CreateRepo("acme", "r", map[string]string{"a.yaml": "a\n"})
	c := srv.Client()
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}

	ch := srv.Changed()
	_, _, err := c.Repositories.Get(ctx, "acme", "r")
	require.NoError(t, err)
	_, _, err = c.Git.GetRef(ctx, "acme", "r", "heads/main")
	require.NoError(t, err)
	require.False(t, closed(ch), "a read changes nothing")

	_, _, err = c.Git.CreateRef(ctx, "acme", "r", &github.Reference{Ref: github.String("refs/heads/x"),
		Object: &github.GitObject{SHA: github.String(srv.Branch("acme", "r", "main"))}})
	require.NoError(t, err)
	require.True(t, closed(ch), "a ref created is signalled before its answer")

	ch = srv.Changed()
	require.False(t, closed(ch), "a new wait starts after the change it saw")
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusAccepted) }))
	t.Cleanup(hook.Close)
	require.NoError(t, srv.Deliver(ctx, hook.URL, "s3cret", "ping", map[string]any{"zen": "Keep it logically awesome."}))
	require.True(t, closed(ch), "a webhook delivery is signalled once it is in the delivery log")

	ch = srv.Changed()
	srv.AdvanceClock(time.Minute)
	require.True(t, closed(ch), "the clock advanced")
}
