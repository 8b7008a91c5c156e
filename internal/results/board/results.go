// What a leaderboard shows of a benchmark: its runs, the cut-off ones, those waiting for a retry.

// Package board builds what a leaderboard shows of a benchmark, its
// runs and its setup, from a Source: the starter's reads Temporal and
// the blob store, a test's answers from memory. Every command that shows
// a benchmark's results (results, plan, report, export) asks it.
package board

import (
	"context"
	"fmt"

	"github.com/mlrb/mlrb/internal/results/leaderboard"
	"github.com/mlrb/mlrb/internal/results/runresults"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// Benchmark is what a Source knows of a benchmark.
type Benchmark struct {
	ID string
	// Running: it has not ended; Done of Total runs have.
	Running     bool
	Done, Total int
	// Runs are its runs, in the order of its matrix.
	Runs []runresults.Child
	// Setup is an ended benchmark's leaderboard setup; Policy a running
	// one's (its setup is made from its runs so far).
	Setup  leaderboard.Setup
	Policy leaderboard.Policy
	// Carried are the results an ended benchmark from before stored
	// results carried in its own (none stored).
	Carried []runs.Result
	// Waiting are a running benchmark's runs that wait for an evaluation
	// retry, shown apart until retried.
	Waiting []runs.Result
}

// Source is where a board is read from.
type Source interface {
	// Benchmark describes benchmark id; an id that is no benchmark is an
	// error naming it.
	Benchmark(ctx context.Context, id string) (*Benchmark, error)
	// Stored reads the results the runs stored, in their order, nil where
	// a run stored none.
	Stored(ctx context.Context, rs []runresults.Child) ([]*runs.Result, error)
	// Completed is the result of a run that completed though none was
	// stored where Stored reads (nil when it did not complete: never
	// started, or cut off).
	Completed(ctx context.Context, r runresults.Child) (*runs.Result, error)
}

// Board is a benchmark's runs and setup; Partial, when it still runs,
// says how far it got.
type Board struct {
	Runs    []runs.Result
	Setup   leaderboard.Setup
	Partial []string
}

// Of builds benchmark id's board: while it runs, the runs that stored a
// result and those waiting for a retry; once it ended, every run, those
// without a result as cut off (infra failures, never a 0).
func Of(ctx context.Context, src Source, id string) (Board, error) {
	b, err := src.Benchmark(ctx, id)
	if err != nil {
		return Board{}, err
	}
	if !b.Running && len(b.Carried) > 0 {
		return Board{Runs: b.Carried, Setup: b.Setup}, nil
	}
	got, err := src.Stored(ctx, b.Runs)
	if err != nil {
		return Board{}, fmt.Errorf("results of %s: %w", id, err)
	}
	if b.Running {
		rows := append(Rows(id, b.Runs, got, false), b.Waiting...)
		note := fmt.Sprintf("benchmark %s is running: %d of %d runs done; the leaderboard holds those and the runs waiting for an evaluation retry (apart until retried)",
			id, b.Done, b.Total)
		return Board{Runs: rows, Setup: leaderboard.SetupOf(leaderboard.RunsOf(rows), b.Policy), Partial: []string{note}}, nil
	}
	for i, r := range got {
		if r != nil {
			continue
		}
		if got[i], err = src.Completed(ctx, b.Runs[i]); err != nil {
			return Board{}, err
		}
	}
	return Board{Runs: Rows(id, b.Runs, got, true), Setup: b.Setup}, nil
}

// Rows are a leaderboard's runs: the results got (in the order of all),
// and, once the benchmark has ended, the runs without one as cut off.
func Rows(id string, all []runresults.Child, got []*runs.Result, ended bool) []runs.Result {
	rows := make([]runs.Result, 0, len(all))
	for i, r := range got {
		switch {
		case r != nil:
			rows = append(rows, *r)
		case ended:
			j := all[i]
			rows = append(rows, runs.Result{RunID: j.ID, Benchmark: id, Task: j.Task, Agent: j.Agent, Seed: j.Seed, Outcome: runs.OutcomeInfraFailed,
				Reason: fmt.Sprintf("cut off before it stored a result (`starter benchmark resume %s` continues it)", id)})
		}
	}
	return rows
}
