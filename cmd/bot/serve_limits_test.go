package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/serve"
)

// chanListener is a listener whose connections arrive on a channel: in a synctest bubble,
// every Accept waiting on it, or on the limit, is durably blocked.
type chanListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error   { l.once.Do(func() { close(l.closed) }); return nil }
func (l *chanListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// TestAttackConnectionFloodIsBounded: with --max-connections 2, a third connection is not
// accepted while two are held open (a flood of idle or half-open connections cannot take the
// process's descriptors); closing one lets it in. Driven by synctest, not by a clock.
func TestAttackConnectionFloodIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := &chanListener{conns: make(chan net.Conn, 3), closed: make(chan struct{})}
		ln := serve.HTTPLimits{MaxConnections: 2}.Listener(inner)
		var mu sync.Mutex
		var accepted []net.Conn
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				accepted = append(accepted, c)
				mu.Unlock()
			}
		}()
		var clients []net.Conn
		for range 3 {
			server, client := net.Pipe()
			clients = append(clients, client)
			inner.conns <- server
		}
		count := func() int {
			mu.Lock()
			defer mu.Unlock()
			return len(accepted)
		}
		synctest.Wait()
		assert.Equal(t, 2, count(), "the third connection waits")
		mu.Lock()
		first := accepted[0]
		mu.Unlock()
		require.NoError(t, first.Close())
		synctest.Wait()
		assert.Equal(t, 3, count(), "a freed slot takes the waiting connection")
		require.NoError(t, ln.Close())
		for _, c := range append(clients, accepted...) {
			_ = c.Close()
		}
		synctest.Wait()
	})
}

// TestAttackSlowHeadersAreCut: a client that opens a connection and never finishes its headers is
// disconnected once the read-header timeout passes (synctest's clock, on an in-memory
// connection), freeing its slot.
func TestAttackSlowHeadersAreCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := &chanListener{conns: make(chan net.Conn, 1), closed: make(chan struct{})}
		l := serve.HTTPLimits{MaxConnections: 1, ReadHeaderTimeout: 5 * time.Second}
		hs := serve.NewHTTPServer(http.NotFoundHandler(), slog.New(slog.DiscardHandler), l)
		done := make(chan error, 1)
		go func() { done <- hs.Serve(l.Listener(inner)) }()
		server, client := net.Pipe()
		inner.conns <- server
		_, err := client.Write([]byte("POST /webhook HTTP/1.1\r\nHost: x\r\n")) // never ends its headers
		require.NoError(t, err)
		read := make(chan error, 1)
		go func() {
			_, err := io.ReadAll(client)
			read <- err
		}()
		time.Sleep(4 * time.Second) // synctest's fake clock: no real wait
		synctest.Wait()
		select {
		case <-read:
			t.Fatal("cut before the read-header timeout")
		default:
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		select {
		case <-read: // the server closed the connection
		default:
			t.Fatal("still open after the read-header timeout")
		}
		require.NoError(t, hs.Close())
		<-done
	})
}

// TestServeLimitFlags: the limits are flags with documented defaults, settable from the
// environment like every serve flag.
func TestServeLimitFlags(t *testing.T) {
	var l serve.HTTPLimits
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	registerLimits(fs, &l)
	assert.Equal(t, serve.HTTPLimits{MaxConnections: 512, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}, l)
	t.Setenv("FLEETBOT_MAX_CONNECTIONS", "64")
	require.NoError(t, fs.Parse([]string{"--read-header-timeout", "3s"}))
	require.NoError(t, flagsFromEnv(fs, limitFlags...))
	assert.Equal(t, 64, l.MaxConnections)
	assert.Equal(t, 3*time.Second, l.ReadHeaderTimeout)
	hs := serve.NewHTTPServer(http.NotFoundHandler(), slog.New(slog.DiscardHandler), l)
	assert.Equal(t, 3*time.Second, hs.ReadHeaderTimeout)
	assert.Error(t, fs.Parse([]string{"--max-connections", "0"}), "at least one connection")
	assert.Error(t, fs.Parse([]string{"--idle-timeout", "0s"}))
}

// TestUntilDoneHonoursASignalInAnyPhase: a read-only command's work still running when the
// signal comes does not hold the command: it returns at once, saying what was interrupted.
func TestUntilDoneHonoursASignalInAnyPhase(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	release := make(chan struct{})
	started := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		_, err := untilDone(ctx, "check control", func() (int, error) {
			close(started)
			<-release // a phase that never looks at ctx (a long load or render)
			return 1, nil
		})
		errc <- err
	}()
	<-started
	cancel(errors.New("terminated signal received"))
	err := <-errc
	require.Error(t, err)
	assert.Contains(t, err.Error(), "check control interrupted (terminated signal received): nothing was written")
	close(release)

	v, err := untilDone(context.Background(), "x", func() (int, error) { return 7, nil })
	assert.NoError(t, err)
	assert.Equal(t, 7, v)
}
