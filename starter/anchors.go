// `starter anchors measure`: its flags and what it does.

package main

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"gopkg.in/yaml.v3"

	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/results/anchors"
	"github.com/mlrb/mlrb/tasks"
	"github.com/mlrb/mlrb/workflows"
)

func anchorsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "anchors", Short: "the baseline and top scores the leaderboard measures the gap closed against"}
	cmd.AddCommand(anchorsMeasureCmd(), anchorsListCmd(), anchorsControlCmd())
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

// runAnchorsMeasure measures the anchor durably: an AnchorWorkflow runs
// one run per seed and stores their mean with the runs, agent, budget and
// evaluator that produced it. Its id is the task's and the role's, so
// the command given again while one is under way waits for that one.
func runAnchorsMeasure(g *globals, o anchorsMeasureOptions, task string) error {
	_, cat, err := g.catalog()
	if err != nil {
		return err
	}
	if _, err := cat.Get(task); err != nil {
		return cli.Usagef("TASK: %v", err)
	}
	ro := o.run
	ro.task = task
	_, run, err := ro.input(g)
	if err != nil {
		return err
	}
	in := workflows.AnchorInput{Task: task, Role: o.role, Run: run}
	for i := range o.seeds {
		in.Seeds = append(in.Seeds, o.run.seed+int64(i))
	}
	wr, err := startAnchor(g, in)
	if err != nil {
		return err
	}
	for _, seed := range in.Seeds {
		fmt.Fprintf(g.errOut, "measuring the %s of %s: run %s\n", o.role, task, workflows.AnchorRunID(wr.GetID(), seed))
	}
	var a tasks.Anchor
	if err := await(g, wr, &a); err != nil {
		return fmt.Errorf("anchor %s: %w", wr.GetID(), err)
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

// startAnchor starts the measurement, or attaches to the one of the same
// task and role under way when it measures the same (an interrupted
// command given again); one that measures something else is refused.
func startAnchor(g *globals, in workflows.AnchorInput) (client.WorkflowRun, error) {
	c, err := g.client()
	if err != nil {
		return nil, err
	}
	id := workflows.AnchorID(in.Task, in.Role)
	if info, err := describe(g.ctx, c, id); err == nil && info.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		var under workflows.AnchorInput
		if err := startInput(g.ctx, c, id, &under); err != nil {
			return nil, err
		}
		if !sameMeasurement(under, in) {
			return nil, cli.Usagef("the %s of %s is being measured already (agent %s, seeds %v): wait for it (`starter anchors measure` with its flags attaches) or cancel it (`temporal workflow terminate -w %s`)",
				in.Role, in.Task, under.Run.Agent, under.Seeds, id)
		}
		fmt.Fprintf(g.errOut, "attached to the measurement under way since %s\n", info.GetStartTime().AsTime().Format(time.RFC3339))
		return c.GetWorkflow(g.ctx, id, ""), nil
	}
	wr, err := c.ExecuteWorkflow(g.ctx, client.StartWorkflowOptions{ID: id, TaskQueue: g.cfg.Temporal.TaskQueue,
		WorkflowExecutionErrorWhenAlreadyStarted: true}, workflows.AnchorWorkflowName, in)
	if err != nil {
		return nil, fmt.Errorf("start the measurement %s: %w", id, err)
	}
	return wr, nil
}

// sameMeasurement tells two measurements of one anchor apart: another
// agent, budget or seeds.
func sameMeasurement(a, b workflows.AnchorInput) bool {
	return a.Run.Agent == b.Run.Agent && a.Run.TimeLimit == b.Run.TimeLimit && slices.Equal(a.Seeds, b.Seeds) &&
		(a.Run.AgentDef == nil) == (b.Run.AgentDef == nil) && (a.Run.AgentDef == nil || a.Run.AgentDef.Hash() == b.Run.AgentDef.Hash())
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
