// `starter experiments`: its flags and what it does.

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/process/show"
	"github.com/mlrb/mlrb/internal/results/runresults"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/sandbox/observe"
	"github.com/mlrb/mlrb/internal/store/blob"
)

// experimentsOptions are `starter experiments`'s flags.
type experimentsOptions struct{ json bool }

func (o *experimentsOptions) AddFlags(f *pflag.FlagSet) {
	f.BoolVar(&o.json, "json", false, "print the experiments and the measures as JSON")
}

func experimentsCmd() *cobra.Command {
	var o experimentsOptions
	cmd := &cobra.Command{
		Use:   "experiments RUN_ID",
		Short: "list the experiments a run's agent ran, as its worker saw them from the host (command, agent time, GPU-hours and utilisation, outcome, the model it produced and its score), and the run's research measures",
		Args:  cobra.ExactArgs(1),
		RunE:  run(func(g *globals, args []string) error { return runExperiments(g, o, args[0]) }),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func runExperiments(g *globals, o experimentsOptions, id string) error {
	cfg, err := g.config()
	if err != nil {
		return err
	}
	store, err := runStore(g, id, func(s blob.Store) (bool, error) {
		obs, err := observe.Load(g.ctx, s, id)
		return len(obs) > 0, err
	})
	if err != nil {
		return err
	}
	obs, err := observe.Load(g.ctx, store, id)
	if err != nil {
		return err
	}
	if len(obs) == 0 {
		return cli.Usagef("run %q has no observed attempt in %s: it has not started an agent yet, or ran on a worker from before observation", id, store)
	}
	// A run still going has no result yet: its experiments are listed
	// without scores, its measures over the agent time seen so far.
	var res runs.Result
	if err := runresults.Get(g.ctx, store, id, &res); err != nil {
		if !errors.Is(err, blob.ErrNotFound) {
			return err
		}
		res.Budget.UsedS = seenAgentTime(obs)
	}
	r := runresults.Research(&res, obs, cfg.Observe.MinExperiment)
	if o.json {
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintln(g.out, string(b))
		return nil
	}
	writeExperiments(g.out, r)
	return nil
}

// withResearch takes the run's result as its worker stored it: the
// workflow's, with what the worker adds (the research measures, GPU
// dollars and each mark's cost), which the workflow never holds.
func withResearch(g *globals, r *runs.Result) {
	store, err := g.store()
	if err != nil {
		return
	}
	var stored runs.Result
	if runresults.Get(g.ctx, store, r.RunID, &stored) != nil || stored.RunID != r.RunID {
		return
	}
	// The stored result is this run's when it ended alike, or when a
	// reviewer's verdict changed how it counts.
	if stored.Outcome == r.Outcome || (stored.Review != nil && stored.Review.Outcome == r.Outcome) {
		*r = stored
	}
}

// seenAgentTime is the agent time the observations reach.
func seenAgentTime(obs []*observe.Observation) float64 {
	var t float64
	for _, o := range obs {
		t = max(t, o.StartAgentS+o.End.Sub(o.Start).Seconds())
	}
	return t
}

// writeExperiments prints the experiments as a table (what the agent ran
// reaches the terminal inert), then the measures.
func writeExperiments(out io.Writer, r observe.Research) {
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ATTEMPT\tSTART\tRAN\tOUTCOME\tGPU-H\tGPU UTIL\tPEAK MEM\tMODEL\tSCORE\tCOMMAND")
	for _, e := range r.Experiments {
		util, model, score := "-", "-", "-"
		if e.MeanUtil != nil {
			util = fmt.Sprintf("%.0f%%", *e.MeanUtil)
		}
		if m := e.Model; m != nil {
			model = fmt.Sprintf("#%d %s", m.Checkpoint, m.Path)
			if m.Score != nil {
				score = fmt.Sprintf("%.4f (%s)", *m.Score, m.Split)
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%.3f\t%s\t%s\t%s\t%s\t%s\n", e.Attempt, show.AgentClock(e.StartS), show.AgentClock(e.EndS-e.StartS), e.Outcome,
			e.GPUHours, util, mib(e.PeakRSS), model, score, e.Command)
	}
	_ = tw.Flush()
	m := r.Measures
	fmt.Fprintf(out, "\n%d experiments (%.2f an hour)", m.Experiments, m.PerHour)
	for _, k := range []observe.Outcome{observe.Ended, observe.OOMKilled, observe.CutOff, observe.Lost, observe.Canceled} {
		if n := m.ByOutcome[string(k)]; n > 0 {
			fmt.Fprintf(out, ", %d %s", n, k)
		}
	}
	fmt.Fprintln(out)
	if m.FirstModelS != nil {
		fmt.Fprintf(out, "first model at %s of agent time\n", show.AgentClock(*m.FirstModelS))
	} else {
		fmt.Fprintln(out, "no checkpoint held a model")
	}
	fmt.Fprintf(out, "longest stall (no experiment, no LLM call): %s\n", show.AgentClock(m.LongestStallS))
	fmt.Fprintf(out, "GPU-hours in experiments: %.2f, of which %.2f produced no model; %.2f h of work cut off by the deadline\n", m.GPUHours, m.GPUHoursNoModel, m.CutOffHours)
	if m.GPUBusyShare != nil {
		fmt.Fprintf(out, "leased GPUs busy %.0f%% of the budget\n", *m.GPUBusyShare*100)
	} else {
		fmt.Fprintln(out, "no GPU was sampled")
	}
}

func mib(b int64) string { return fmt.Sprintf("%d MiB", b>>20) }
