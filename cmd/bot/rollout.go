package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetbot-io/fleetbot/internal/app"
)

// rolloutCommand is `fleetbot rollout`: where a rollout in waves stands (read-only).
func (a *frontend) rolloutCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "rollout",
		Short: "Show where the rollout of the control repo's revision stands, wave by wave",
	}
	status := &cobra.Command{
		Use:   "status",
		Short: "Show each rollout wave's state, the clusters held and why (read-only)",
		Long: `rollout status plans the control repo against --forge, as plan does, and prints
the rollout gate's verdict for its revision: each wave (done, soaking, active, waiting,
halted) with its clusters changed, merged and healthy, the clusters whose pull request
is held and why, and a halt. It never writes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := a.load(cmd.Context())
			if err != nil {
				return app.DescribeLoadError(a.control, err)
			}
			if len(f.Repo.Platform.Spec.Rollout.Waves) == 0 {
				fmt.Fprintln(a.stdout, "no rollout waves declared (platform spec.rollout.waves): every change reaches every cluster at once")
				return nil
			}
			if a.forge == "" {
				return errors.New("rollout status needs --forge: the rollout's state is read from the target repos' pull requests and commit statuses")
			}
			log, err := a.logger()
			if err != nil {
				return err
			}
			targets, err := a.openTargets(cmd.Context(), a.forge, f.Owner(), true, log)
			if err != nil {
				return err
			}
			defer targets.Close()
			out, err := targets.Plan(cmd.Context(), f, app.RunOptions{Logger: log})
			if err != nil {
				return err
			}
			if out == nil || out.Rollout() == nil {
				return errors.New("the plan reported no rollout state")
			}
			return writeRolloutStatus(a.stdout, out.Rollout())
		},
	}
	a.registerGitURL(status.Flags())
	root.AddCommand(status)
	return root
}

// writeWaveGroups prints which clusters each declared wave takes (the offline plan).
func writeWaveGroups(w io.Writer, f *app.Fleet) {
	repo := f.Repo
	if repo.Platform == nil || len(repo.Platform.Spec.Rollout.Waves) == 0 {
		return
	}
	fmt.Fprintln(w, "\nrollout waves (a change reaches them in this order; pass --forge for their state):")
	for i, g := range repo.Waves() {
		list := strings.Join(g.Clusters, ", ")
		if list == "" {
			list = "(no cluster)"
		}
		fmt.Fprintf(w, "  %d. %s: %s\n", i+1, g.Name, list)
	}
}

// writeRolloutStatus prints the rollout gate's verdict.
func writeRolloutStatus(w io.Writer, st *app.RolloutStatus) error {
	state := "in progress"
	switch {
	case st.Halted != nil:
		state = "halted"
	case st.Done:
		state = "done"
	}
	fmt.Fprintf(w, "rollout of %s: %s\n", sourceLabel(st.Revision), state)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  WAVE\tSTATE\tCLUSTERS\tCHANGED\tMERGED\tHEALTHY\tSOAK UNTIL")
	for _, ws := range st.Waves {
		soak := "-"
		if !ws.SoakUntil.IsZero() {
			soak = ws.SoakUntil.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%d\t%d\t%s\n", ws.Name, ws.State, ws.Total, ws.Changed, ws.Merged, ws.Healthy, soak)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if h := st.Halted; h != nil {
		fmt.Fprintf(w, "halted in wave %s on cluster %s: %s\n", h.Wave, h.Cluster, h.Reason)
	}
	if len(st.Admitted) > 0 {
		fmt.Fprintf(w, "may have a pull request now: %s\n", strings.Join(st.Admitted, ", "))
	}
	if len(st.Held) > 0 {
		fmt.Fprintln(w, "held:")
		for _, c := range slices.Sorted(maps.Keys(st.Held)) {
			fmt.Fprintf(w, "  %s: %s\n", c, st.Held[c])
		}
	}
	if !st.NextCheck.IsZero() {
		fmt.Fprintf(w, "next change by time alone: %s\n", st.NextCheck.UTC().Format(time.RFC3339))
	}
	return nil
}
