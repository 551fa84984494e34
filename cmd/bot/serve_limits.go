package main

import (
	"github.com/spf13/pflag"

	"github.com/fleetbot-io/fleetbot/internal/serve"
)

// registerLimits defines the limits' flags on fs.
func registerLimits(fs *pflag.FlagSet, l *serve.HTTPLimits) {
	minIntVar(fs, &l.MaxConnections, "max-connections", serve.DefaultMaxConnections, 1,
		"connections served at once; further ones wait in the kernel's backlog until one closes")
	positiveDurationVar(fs, &l.ReadHeaderTimeout, "read-header-timeout", serve.DefaultReadHeaderTimeout, "how long a client may take to send a request's headers")
	positiveDurationVar(fs, &l.ReadTimeout, "read-timeout", serve.DefaultReadTimeout, "how long a client may take to send a whole request")
	positiveDurationVar(fs, &l.WriteTimeout, "write-timeout", serve.DefaultWriteTimeout, "how long writing an answer may take")
	positiveDurationVar(fs, &l.IdleTimeout, "idle-timeout", serve.DefaultIdleTimeout, "how long an idle keep-alive connection stays open")
}

// limitFlags are the limits' flag names, for flagsFromEnv.
var limitFlags = []string{"max-connections", "read-header-timeout", "read-timeout", "write-timeout", "idle-timeout"}
