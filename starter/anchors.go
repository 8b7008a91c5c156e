package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"
	"gopkg.in/yaml.v3"

	"github.com/mlrb/mlrb/internal/anchors"
	"github.com/mlrb/mlrb/internal/cli"
	"github.com/mlrb/mlrb/internal/runs"
	"github.com/mlrb/mlrb/tasks"
)

func anchorsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "anchors", Short: "the baseline and top scores the leaderboard measures the gap closed against"}
	cmd.AddCommand(anchorsMeasureCmd(), anchorsListCmd())
	return cmd
}

// anchorsMeasureOptions are `starter anchors measure`'s flags.
type anchorsMeasureOptions struct {
	role  string
	run   runOptions
	seeds int
	print bool
}

func (o *anchorsMeasureOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.role, "role", "", "baseline (e.g. the no-op agent's untrained model) or top (e.g. the reference agent at a long budget)")
	f.StringVar(&o.run.agent, "agent", "", "the agent whose model is the anchor")
	f.Int64Var(&o.run.seed, "seed", 0, "the first seed (0 or more)")
	f.IntVar(&o.seeds, "seeds", 1, "runs, seeds --seed onwards, the anchor is the mean of")
	f.DurationVar(&o.run.limit, "time-limit", 0, "agent time budget (default: the task's)")
	f.StringVar(&o.run.image, "image", "", "a one-off agent image instead of a definition (needs --label)")
	f.StringVar(&o.run.label, "label", "", "with --image: the one-off agent's name")
	f.BoolVar(&o.print, "yaml", false, "also print the anchor as the catalog's anchors entry takes it")
}

func (o anchorsMeasureOptions) check() error {
	if err := anchors.CheckRole(o.role); err != nil {
		return cli.Usagef("--role: %v", err)
	}
	if o.run.agent == "" && o.run.image == "" {
		return cli.Usagef("--agent: name the agent whose model is the %s", o.role)
	}
	if o.seeds < 1 {
		return cli.Usagef("--seeds: %d must be at least 1", o.seeds)
	}
	return nil
}

func anchorsMeasureCmd() *cobra.Command {
	var o anchorsMeasureOptions
	cmd := &cobra.Command{
		Use:   "measure TASK --role baseline|top --agent AGENT",
		Short: "run AGENT on TASK, score its model with this system's own evaluator and store the score as the task's anchor, with its provenance",
		Args:  cobra.ExactArgs(1),
		PreRunE: func(*cobra.Command, []string) error {
			return o.check()
		},
		RunE: run(func(g *globals, args []string) error { return runAnchorsMeasure(g, o, args[0]) }),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// runAnchorsMeasure runs the anchor's runs (one per seed, at once) to
// their end and stores the mean of their scores with the runs, agent,
// budget and evaluator that produced it.
func runAnchorsMeasure(g *globals, o anchorsMeasureOptions, task string) error {
	_, cat, err := g.catalog()
	if err != nil {
		return err
	}
	if _, err := cat.Get(task); err != nil {
		return cli.Usagef("TASK: %v", err)
	}
	results, err := measureRuns(g, o, task)
	if err != nil {
		return err
	}
	res := results[0]
	a := tasks.Anchor{RunID: res.RunID, Agent: res.Agent, TimeLimit: tasks.Duration(time.Duration(res.TimeLimitS * float64(time.Second))),
		Evaluator: evaluatorOf(res), Measured: time.Now().UTC().Truncate(time.Second)}
	for _, r := range results {
		a.Score += *r.Score / float64(len(results))
		if len(results) > 1 {
			a.Runs = append(a.Runs, r.RunID)
		}
	}
	store, err := g.store()
	if err != nil {
		return err
	}
	if err := anchors.Put(g.ctx, store, task, o.role, a); err != nil {
		return err
	}
	fmt.Fprintf(g.out, "%s %s: %.6f (%s)\n", task, o.role, a.Score, anchors.Describe(&a))
	if o.print {
		b, err := yaml.Marshal(map[string]any{"anchors": map[string]tasks.Anchor{o.role: a}})
		if err != nil {
			return err
		}
		fmt.Fprint(g.out, string(b))
	}
	return nil
}

// measureRuns starts one run per seed and waits for all; each must have
// a score.
func measureRuns(g *globals, o anchorsMeasureOptions, task string) ([]runs.Result, error) {
	suffix := randomSuffix()
	started := make([]client.WorkflowRun, o.seeds)
	for i := range started {
		ro := o.run
		ro.task, ro.seed = task, o.run.seed+int64(i)
		ro.id = fmt.Sprintf("anchor-%s-%s-s%d-%s", task, o.role, ro.seed, suffix)
		run, err := startRun(g, ro)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(g.errOut, "measuring the %s of %s: run %s\n", o.role, task, run.GetID())
		started[i] = run
	}
	out := make([]runs.Result, len(started))
	for i, run := range started {
		if err := run.Get(g.ctx, &out[i]); err != nil {
			return nil, fmt.Errorf("run %s: %w", run.GetID(), err)
		}
		if r := out[i]; r.Score == nil {
			return nil, fmt.Errorf("run %s ended %s without a score (%s): no anchor", r.RunID, r.Outcome, r.Reason)
		}
	}
	return out, nil
}

// evaluatorOf names what scored a run: the evaluator image's digest, or
// the worker binary's for process evaluators (as the worker reported it).
func evaluatorOf(res runs.Result) string {
	if res.EvaluatorImage != "" {
		return res.EvaluatorImage
	}
	return "unrecorded (a worker from before evaluators were recorded)"
}

// anchorsListOptions are `starter anchors list`'s flags.
type anchorsListOptions struct{ suite string }

func (o *anchorsListOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.suite, "suite", "", "only this suite: full or mini")
}

func anchorsListCmd() *cobra.Command {
	var o anchorsListOptions
	cmd := &cobra.Command{
		Use: "list", Short: "list each task's anchors and where they come from (a measurement in the store wins over the catalog's)", Args: cobra.NoArgs,
		RunE: run(func(g *globals, _ []string) error { return runAnchorsList(g, o) }),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func runAnchorsList(g *globals, o anchorsListOptions) error {
	_, cat, err := g.catalog()
	if err != nil {
		return err
	}
	store, err := g.store()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(g.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tROLE\tSCORE\tSOURCE")
	for _, id := range cat.IDs(o.suite) {
		spec, _ := cat.Get(id)
		a, err := anchors.Of(g.ctx, store, spec)
		if err != nil {
			return err
		}
		writeAnchor(tw, id, anchors.Baseline, a.Baseline)
		writeAnchor(tw, id, anchors.Top, a.Top)
	}
	return tw.Flush()
}

func writeAnchor(w io.Writer, task, role string, a *tasks.Anchor) {
	if a == nil {
		fmt.Fprintf(w, "%s\t%s\t—\tnone (`starter anchors measure %s --role %s --agent ...`)\n", task, role, task, role)
		return
	}
	fmt.Fprintf(w, "%s\t%s\t%.6f\t%s\n", task, role, a.Score, anchors.Describe(a))
}
