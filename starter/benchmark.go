package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/app"
	"github.com/mlrb/mlrb/internal/blob"
	"github.com/mlrb/mlrb/internal/cli"
	"github.com/mlrb/mlrb/internal/leaderboard"
	"github.com/mlrb/mlrb/internal/resume"
	"github.com/mlrb/mlrb/internal/runresults"
	"github.com/mlrb/mlrb/workflows"
)

func benchmarkCmd() *cobra.Command {
	var suite, id, format string
	var agents, only []string
	var seeds, concurrency, continueAfter int
	var wait bool
	cmd := &cobra.Command{
		Use:   "benchmark --suite mini|full --agents A[,B] --seeds N",
		Short: "start a benchmark: every agent × task × seed as child runs with deterministic ids",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, cat, err := loadCatalog(cmd)
			if err != nil {
				return err
			}
			if suite != "mini" && suite != "full" {
				return cli.Usagef("--suite: %q is not mini or full", suite)
			}
			if seeds < 1 || concurrency < 1 {
				return cli.Usagef("--seeds and --concurrency must be at least 1")
			}
			if continueAfter < 1 {
				return cli.Usagef("--continue-after: %d must be at least 1", continueAfter)
			}
			if err := checkFormat(format); err != nil {
				return err
			}
			ids := only
			if len(ids) == 0 {
				ids = cat.IDs(suite)
			}
			if err := checkDistinct("--tasks", ids); err != nil {
				return err
			}
			if err := checkDistinct("--agents", agents); err != nil {
				return err
			}
			if slices.Contains(agents, activities.AgentImage) {
				return cli.Usagef("--agents: agent %s runs an agent image, which benchmarks do not take; start its runs with `starter run --agent %s --image IMAGE`", activities.AgentImage, activities.AgentImage)
			}
			for _, a := range agents {
				for _, t := range ids {
					if _, err := checkRun(cat, app.Policy(cfg), t, a, 0, 0); err != nil {
						return err
					}
				}
			}
			if id == "" {
				id = fmt.Sprintf("bench-%s-%s", suite, time.Now().UTC().Format("20060102-150405"))
			} else if err := checkID(id); err != nil {
				return err
			}
			ctx := cmd.Context()
			c, err := app.Dial(ctx, cfg, zap.NewNop())
			if err != nil {
				return err
			}
			defer c.Close()
			in := workflows.NewBenchmarkInput(ids, agents, seeds, concurrency, workflows.RunInput{Provider: cfg.Agent.Provider, Policy: app.Policy(cfg)})
			in.ContinueAfter = continueAfter
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: cfg.Temporal.TaskQueue,
				WorkflowExecutionErrorWhenAlreadyStarted: true,
				// A benchmark id names one set of runs: never start it twice.
				WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
			}, workflows.BenchmarkWorkflowName, in)
			var started *serviceerror.WorkflowExecutionAlreadyStarted
			if errors.As(err, &started) {
				return cli.Usagef("benchmark %s was already started; its runs are not started twice (see `starter results %s`)", id, id)
			}
			if err != nil {
				return fmt.Errorf("start benchmark: %w", err)
			}
			fmt.Println(run.GetID())
			if !wait {
				return nil
			}
			return awaitLeaderboard(ctx, c, cfg, run, format)
		},
	}
	f := cmd.Flags()
	f.StringVar(&suite, "suite", "mini", "mini or full")
	f.StringSliceVar(&agents, "agents", []string{"reference"}, "agents to compare")
	f.StringSliceVar(&only, "tasks", nil, "only these tasks (default: the whole suite)")
	f.IntVar(&seeds, "seeds", 5, "seeds per task and agent")
	f.IntVar(&concurrency, "concurrency", workflows.DefaultConcurrency, "runs at once")
	f.IntVar(&continueAfter, "continue-after", workflows.DefaultContinueAfter, "runs one execution of the benchmark starts before it continues as new (bounds its history)")
	f.StringVar(&id, "id", "", "benchmark id (default: generated)")
	f.BoolVar(&wait, "wait", false, "wait and print the leaderboard")
	f.StringVar(&format, "format", "table", "with --wait: table, md, csv, json or svg")
	config.AddFlags(f, cli.PolicyKeys...)
	cmd.AddCommand(benchmarkResumeCmd())
	return cmd
}

func resultsCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:     "results BENCH_ID",
		Short:   "print a benchmark's leaderboard (table, md, csv, json or svg); partial while it runs",
		Args:    cobra.ExactArgs(1),
		PreRunE: func(*cobra.Command, []string) error { return checkFormat(format) },
		RunE: withClient(func(ctx context.Context, c client.Client, cfg *config.Config, args []string) error {
			busy, _, err := running(ctx, c, args[0])
			if err != nil {
				return err
			}
			if busy {
				snap, err := snapshotBenchmark(ctx, c, args[0])
				if err != nil {
					return err
				}
				fmt.Fprintf(os.Stderr, "benchmark %s is running: %d of %d runs done; the leaderboard holds those and the runs waiting for an evaluation retry (invalid until retried)\n",
					args[0], snap.prog.Done, snap.prog.Total)
				runs, err := storedRuns(ctx, c, cfg, args[0], false)
				if err != nil {
					return err
				}
				runs = append(runs, snap.awaitingRetry()...)
				setup := leaderboard.SetupOf(workflows.LeaderboardRuns(runs), snap.prog.Policy)
				return printLeaderboard(args[0], runs, setup, format)
			}
			return awaitLeaderboard(ctx, c, cfg, c.GetWorkflow(ctx, args[0], ""), format)
		}),
	}
	cmd.Flags().StringVar(&format, "format", "table", "table, md, csv, json or svg (a chart with error bars)")
	return cmd
}

func checkFormat(format string) error {
	if !slices.Contains(leaderboard.Formats, format) {
		return cli.Usagef("--format: %q is not one of %s", format, strings.Join(leaderboard.Formats, ", "))
	}
	return nil
}

// awaitLeaderboard waits for a benchmark (through its continues-as-new)
// and prints its leaderboard.
func awaitLeaderboard(ctx context.Context, c client.Client, cfg *config.Config, run client.WorkflowRun, format string) error {
	var res workflows.BenchmarkResult
	if err := run.Get(ctx, &res); err != nil {
		return fmt.Errorf("benchmark %s: %w", run.GetID(), err)
	}
	return printBenchmark(ctx, c, cfg, &res, format)
}

// printBenchmark prints an ended benchmark's leaderboard, from the results
// its runs stored (or, for a benchmark from before those, its own).
func printBenchmark(ctx context.Context, c client.Client, cfg *config.Config, res *workflows.BenchmarkResult, format string) error {
	runs := res.Runs
	if len(runs) == 0 {
		var err error
		if runs, err = storedRuns(ctx, c, cfg, res.BenchmarkID, true); err != nil {
			return err
		}
	}
	return printLeaderboard(res.BenchmarkID, runs, res.Setup, format)
}

// storedRuns reads the results a benchmark's runs stored in the blob
// store, in run order. Runs without one are left out while the benchmark
// runs (under way or queued); once it has ended they were cut off, and
// count as infra failures, as its leaderboard counts them.
func storedRuns(ctx context.Context, c client.Client, cfg *config.Config, id string, ended bool) ([]workflows.RunResult, error) {
	var in workflows.BenchmarkInput
	if err := startInput(ctx, c, id, &in); err != nil {
		return nil, err
	}
	store, err := app.OpenStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	all := in.ChildRuns(id)
	got, err := runresults.GetAll[workflows.RunResult](ctx, store, all, nil)
	if err != nil {
		return nil, fmt.Errorf("results of %s: %w", id, err)
	}
	runs := make([]workflows.RunResult, 0, len(all))
	for i, r := range got {
		switch {
		case r != nil:
			runs = append(runs, *r)
		case ended:
			j := all[i]
			runs = append(runs, workflows.RunResult{RunID: j.ID, Task: j.Task, Agent: j.Agent, Seed: j.Seed, Outcome: workflows.OutcomeInfraFailed,
				Reason: fmt.Sprintf("cut off before it stored a result (`starter benchmark resume %s` continues it)", id)})
		}
	}
	return runs, nil
}

func printLeaderboard(id string, runs []workflows.RunResult, setup leaderboard.Setup, format string) error {
	if err := leaderboard.Write(os.Stdout, format, id, workflows.LeaderboardRuns(runs), setup); err != nil {
		return cli.Usagef("--format: %v", err)
	}
	if format != "table" {
		return nil
	}
	var invalid []string
	for _, r := range runs {
		if r.Score == nil {
			invalid = append(invalid, fmt.Sprintf("%s (%s: %s)", r.RunID, r.Outcome, r.Reason))
		}
	}
	if len(invalid) > 0 {
		fmt.Printf("%d invalid, never averaged as 0:\n  %s\n", len(invalid), strings.Join(invalid, "\n  "))
	}
	return nil
}

func benchmarkResumeCmd() *cobra.Command {
	var wait bool
	var format string
	cmd := &cobra.Command{
		Use:   "resume BENCH_ID",
		Short: "resume an ended benchmark: keep the runs with results, continue the others from their checkpoints",
		Long: `Resume starts an ended benchmark again under its id, with its original
tasks, agents, seeds and policy. Runs that have a result are kept as they
are. Runs that were cut off (terminated, failed, never started) or ended
infra_failed or evaluation_failed continue from their latest checkpoint:
an agent that had finished is only evaluated again, never re-run.`,
		Args:    cobra.ExactArgs(1),
		PreRunE: func(*cobra.Command, []string) error { return checkFormat(format) },
		RunE: withClient(func(ctx context.Context, c client.Client, cfg *config.Config, args []string) error {
			id := args[0]
			info, err := describe(ctx, c, id)
			if err != nil {
				return err
			}
			if info.GetType().GetName() != workflows.BenchmarkWorkflowName {
				return cli.Usagef("%s is a %s, not a benchmark", id, info.GetType().GetName())
			}
			if info.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				return cli.Usagef("benchmark %s is still running: nothing to resume (see `starter watch %s`)", id, id)
			}
			var in workflows.BenchmarkInput
			if err := startInput(ctx, c, id, &in); err != nil {
				return err
			}
			store, err := app.OpenStore(ctx, cfg)
			if err != nil {
				return err
			}
			plan, err := resume.Make(ctx, resume.Temporal{Client: c, Store: store}, id, in.ChildRuns(id))
			if err != nil {
				return err
			}
			if len(plan.Busy) > 0 {
				return cli.Usagef("runs of %s are still running: %s; wait for them to end or `starter cancel` them", id, strings.Join(plan.Busy, ", "))
			}
			for _, rid := range plan.UncarriedIDs() {
				fmt.Fprintf(os.Stderr, "warning: %s: its lost time is not carried over (%v)\n", rid, plan.Uncarried[rid])
			}
			if len(plan.Again) == 0 {
				fmt.Printf("benchmark %s: all %d runs have results; nothing to resume\n", id, len(plan.Kept))
				return nil
			}
			key, err := storePlan(ctx, store, id, plan)
			if err != nil {
				return err
			}
			in.Resumed, in.Kept, in.Carried, in.State, in.Plan = true, nil, nil, nil, key
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: cfg.Temporal.TaskQueue,
				WorkflowExecutionErrorWhenAlreadyStarted: true,
				// Resuming is the one way to start a benchmark id again.
				WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
			}, workflows.BenchmarkWorkflowName, in)
			if err != nil {
				return fmt.Errorf("resume benchmark %s: %w", id, err)
			}
			fmt.Printf("%s resumed: %d runs kept, %d to continue: %s\n", run.GetID(), len(plan.Kept), len(plan.Again), abbreviate(plan.Again, 20))
			if !wait {
				return nil
			}
			return awaitLeaderboard(ctx, c, cfg, run, format)
		}),
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait and print the leaderboard")
	cmd.Flags().StringVar(&format, "format", "table", "with --wait: table, md, csv, json or svg")
	return cmd
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
	key := activities.PlanKey(id, time.Now())
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
