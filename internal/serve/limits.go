package serve

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"
)

// Defaults of serve's HTTP limits (docs/serve.md, "Hostile load").
const (
	// DefaultMaxConnections bounds the connections serve holds open at once. Beyond it a new
	// connection waits in the kernel's backlog until one closes: a flood of half-open or idle
	// connections costs at most this many descriptors, never the open-file limit every other
	// socket, file and git object of the process shares.
	DefaultMaxConnections = 512
	// DefaultReadHeaderTimeout is how long a client has to send a request's headers.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout is how long a client has to send a whole request (GitHub sends a
	// 25 MB delivery in well under it).
	DefaultReadTimeout = 30 * time.Second
	// DefaultWriteTimeout is how long writing an answer may take.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultIdleTimeout closes a keep-alive connection idle this long.
	DefaultIdleTimeout = 2 * time.Minute
	// maxHeaderBytes bounds a request's headers.
	maxHeaderBytes = 64 << 10
)

// HTTPLimits bound serve's HTTP side against hostile load: connections held at once, and the
// time a client may take for each part of a request.
type HTTPLimits struct {
	MaxConnections                                            int
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
}

// WithDefaults fills the limits left zero with their defaults.
func (l HTTPLimits) WithDefaults() HTTPLimits {
	if l.MaxConnections <= 0 {
		l.MaxConnections = DefaultMaxConnections
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&l.ReadHeaderTimeout, DefaultReadHeaderTimeout}, {&l.ReadTimeout, DefaultReadTimeout},
		{&l.WriteTimeout, DefaultWriteTimeout}, {&l.IdleTimeout, DefaultIdleTimeout}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	return l
}

// Listener bounds ln to MaxConnections connections at once (golang.org/x/net/netutil).
func (l HTTPLimits) Listener(ln net.Listener) net.Listener {
	return netutil.LimitListener(ln, l.WithDefaults().MaxConnections)
}

// String describes the limits for the startup log.
func (l HTTPLimits) String() string {
	l = l.WithDefaults()
	return fmt.Sprintf("max %d connections, headers within %s, request within %s, answer within %s, idle %s",
		l.MaxConnections, l.ReadHeaderTimeout, l.ReadTimeout, l.WriteTimeout, l.IdleTimeout)
}

// NewHTTPServer is serve's HTTP server, bounded against slow or greedy clients: headers must
// arrive within the read-header timeout and stay under 64 KiB, a whole request within the read
// timeout, an answer must be written within the write timeout, and idle keep-alive connections
// close after the idle timeout.
func NewHTTPServer(h http.Handler, log *slog.Logger, l HTTPLimits) *http.Server {
	l = l.WithDefaults()
	return &http.Server{
		Handler: h, ReadHeaderTimeout: l.ReadHeaderTimeout, ReadTimeout: l.ReadTimeout,
		WriteTimeout: l.WriteTimeout, IdleTimeout: l.IdleTimeout, MaxHeaderBytes: maxHeaderBytes,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}
