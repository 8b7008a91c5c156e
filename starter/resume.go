// `starter benchmark resume`: its flags and what it does.

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/mlrb/mlrb/agents"
	"github.com/mlrb/mlrb/internal/process/app"
	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/results/resume"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/keys"
	"github.com/mlrb/mlrb/workflows"
)

// resumeOptions are `starter benchmark resume`'s flags.
type resumeOptions struct {
	wait   bool
	format string
}

func (o *resumeOptions) AddFlags(f *pflag.FlagSet) {
	f.BoolVar(&o.wait, "wait", false, "wait and print the leaderboard")
	f.StringVar(&o.format, "format", "table", "with --wait: table, md, csv, json or svg")
}

func benchmarkResumeCmd() *cobra.Command {
	var o resumeOptions
	cmd := &cobra.Command{
		Use:   "resume BENCH_ID",
		Short: "resume an ended benchmark: keep the runs with results, continue the others from their checkpoints",
		Long: `Resume starts an ended benchmark again under its id, with its original
tasks, agents, seeds and policy. Runs that have a result are kept as they
are. Runs that were cut off (terminated, failed, never started) or ended
infra_failed or evaluation_failed continue from their latest checkpoint:
an agent that had finished is only evaluated again, never re-run.`,
		Args:    cobra.ExactArgs(1),
		PreRunE: func(*cobra.Command, []string) error { return checkFormat(o.format) },
		RunE:    run(func(g *globals, args []string) error { return runResume(g, o, args[0]) }),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// runResume plans the resume of an ended benchmark (internal/results/resume),
// stores the plan and starts the benchmark again under its id.
func runResume(g *globals, o resumeOptions, id string) error {
	return restart(g, o, id, "resumed", nil)
}

// growOptions are `starter benchmark extend`'s flags.
type growOptions struct {
	resumeOptions
	agents []string
	seeds  int
}

func (o *growOptions) AddFlags(f *pflag.FlagSet) {
	o.resumeOptions.AddFlags(f)
	f.StringSliceVar(&o.agents, "agents", nil, "agent definitions to add (see starter agents list)")
	f.IntVar(&o.seeds, "seeds", 0, "seeds per task and agent in all (more than it has: the new ones run)")
}

func benchmarkExtendCmd() *cobra.Command {
	var o growOptions
	cmd := &cobra.Command{
		Use:   "extend BENCH_ID [--agents C[,D]] [--seeds N]",
		Short: "add agents or seeds to an ended benchmark: only the new runs (and any cut off) run; runs with a result are kept",
		Args:  cobra.ExactArgs(1),
		PreRunE: func(*cobra.Command, []string) error {
			if len(o.agents) == 0 && o.seeds == 0 {
				return cli.Usagef("give --agents to add or --seeds N (the seeds per task and agent in all)")
			}
			if o.seeds < 0 {
				return cli.Usagef("--seeds: %d is negative", o.seeds)
			}
			return checkFormat(o.format)
		},
		RunE: run(func(g *globals, args []string) error {
			return restart(g, o.resumeOptions, args[0], "extended", func(in *workflows.BenchmarkInput) error { return o.extend(g, in) })
		}),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// extend adds the new agents and seeds to a benchmark's input.
func (o growOptions) extend(g *globals, in *workflows.BenchmarkInput) error {
	if o.seeds != 0 && o.seeds <= len(in.Seeds) {
		return cli.Usagef("--seeds: the benchmark has %d seeds per task and agent; give more to add some", len(in.Seeds))
	}
	next := int64(1)
	for _, s := range in.Seeds {
		next = max(next, s+1)
	}
	for len(in.Seeds) < o.seeds {
		in.Seeds = append(in.Seeds, next)
		next++
	}
	if len(o.agents) == 0 {
		return nil
	}
	if err := checkDistinct("--agents", append(slices.Clone(in.Agents), o.agents...)); err != nil {
		return cli.Usagef("--agents: %v (an agent the benchmark has already)", err)
	}
	defs, err := agentsOf(g, "--agents", o.agents)
	if err != nil {
		return err
	}
	cfg, cat, err := g.catalog()
	if err != nil {
		return err
	}
	if in.AgentDefs == nil {
		in.AgentDefs = map[string]agents.Definition{}
		// A benchmark from before definitions named built-in agents.
		for _, a := range in.Agents {
			in.AgentDefs[a] = agents.Of(nil, a, "", "")
		}
	}
	for _, d := range defs {
		for _, t := range in.Tasks {
			if _, err := checkRun("--agents", cat, app.Policy(cfg), t, d, 0, in.Run.TimeLimit); err != nil {
				return err
			}
		}
		in.Agents = append(in.Agents, d.Name)
		in.AgentDefs[d.Name] = d
	}
	// The new image agents are pinned when the benchmark starts again;
	// the others keep the digests they ran (in.Images).
	return nil
}

// restart starts an ended benchmark again under its id, its input
// changed by change (nil: as it was): runs with a result are kept, the
// others (cut off, failed for infrastructure, new) run.
func restart(g *globals, o resumeOptions, id, verb string, change func(*workflows.BenchmarkInput) error) error {
	c, in, err := endedBenchmark(g, id)
	if err != nil {
		return err
	}
	if change != nil {
		if err := change(&in); err != nil {
			return err
		}
	}
	store, err := g.store()
	if err != nil {
		return err
	}
	plan, err := resume.Make(g.ctx, resumeSource{Client: c, Store: store}, id, in.ChildRuns(id))
	if err != nil {
		return err
	}
	if len(plan.Busy) > 0 {
		return cli.Usagef("runs of %s are still running: %s; wait for them to end or `starter cancel` them", id, strings.Join(plan.Busy, ", "))
	}
	for _, rid := range plan.UncarriedIDs() {
		fmt.Fprintf(g.errOut, "warning: %s: its lost time is not carried over (%v)\n", rid, plan.Uncarried[rid])
	}
	if len(plan.Again) == 0 {
		fmt.Fprintf(g.out, "benchmark %s: all %d runs have results; nothing to run\n", id, len(plan.Kept))
		return nil
	}
	key, err := storePlan(g.ctx, store, id, plan)
	if err != nil {
		return err
	}
	in.Resumed, in.Kept, in.Carried, in.State, in.Plan = true, nil, nil, nil, key
	run, err := c.ExecuteWorkflow(g.ctx, client.StartWorkflowOptions{ID: id, TaskQueue: g.cfg.Temporal.TaskQueue,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		// Resuming is the one way to start a benchmark id again.
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	}, workflows.BenchmarkWorkflowName, in)
	if err != nil {
		return fmt.Errorf("resume benchmark %s: %w", id, err)
	}
	fmt.Fprintf(g.out, "%s %s: %d runs kept, %d to run: %s\n", run.GetID(), verb, len(plan.Kept), len(plan.Again), abbreviate(plan.Again, 20))
	if !o.wait {
		return nil
	}
	return awaitLeaderboard(g, run, o.format)
}

// endedBenchmark is the input of benchmark id, which must have ended.
func endedBenchmark(g *globals, id string) (client.Client, workflows.BenchmarkInput, error) {
	var in workflows.BenchmarkInput
	c, err := g.client()
	if err != nil {
		return nil, in, err
	}
	info, err := describe(g.ctx, c, id)
	if err != nil {
		return nil, in, err
	}
	if !info.bench {
		return nil, in, cli.Usagef("%s is a %s, not a benchmark", id, info.GetType().GetName())
	}
	if info.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return nil, in, cli.Usagef("benchmark %s is still running: nothing to resume (see `starter watch %s`)", id, id)
	}
	return c, in, startInput(g.ctx, c, id, &in)
}

// startInput reads what a run or benchmark was started with, into in,
// from the first event of its latest execution.
func startInput(ctx context.Context, c client.Client, id string, in any) error {
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return fmt.Errorf("%s has no history", id)
	}
	ev, err := it.Next()
	if err != nil {
		return fmt.Errorf("history of %s: %w", id, err)
	}
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	if attrs == nil {
		return fmt.Errorf("history of %s does not start with its input", id)
	}
	if err := converter.GetDefaultDataConverter().FromPayloads(attrs.Input, in); err != nil {
		return fmt.Errorf("input of %s: %w", id, err)
	}
	return nil
}

// storePlan stores a resume plan where the resumed benchmark reads it,
// so that its input stays small however many runs it has.
func storePlan(ctx context.Context, store blob.Store, id string, p *resume.Plan) (string, error) {
	b, err := json.Marshal(p.Entries())
	if err != nil {
		return "", fmt.Errorf("encode resume plan: %w", err)
	}
	key := keys.Plan(id, time.Now())
	if err := store.Put(ctx, key, bytes.NewReader(b)); err != nil {
		return "", fmt.Errorf("store resume plan of %s: %w", id, err)
	}
	return key, nil
}

// abbreviate lists ids, the first n of them.
func abbreviate(ids []string, n int) string {
	if len(ids) <= n {
		return strings.Join(ids, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ids[:n], ", "), len(ids)-n)
}
