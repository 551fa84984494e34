package app

import "github.com/fleetbot-io/fleetbot/internal/fleetgen"

// GenerateOptions size a synthetic control repo (fleetbot dev generate); zero values pick
// defaults.
type GenerateOptions = fleetgen.Options

// GenerateControlRepo writes a synthetic control repo of opts' size under dir and returns
// how many files it wrote: the same options and seed always give the same files.
func GenerateControlRepo(dir string, opts GenerateOptions) (int, error) {
	n := len(fleetgen.Generate(opts))
	if err := fleetgen.WriteDir(dir, opts); err != nil {
		return 0, err
	}
	return n, nil
}
