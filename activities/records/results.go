// StoreResult and the benchmark's results kept out of Temporal payloads.

package records

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/results/certificate"
	"github.com/mlrb/mlrb/internal/results/leaderboard"
	"github.com/mlrb/mlrb/internal/results/resume"
	"github.com/mlrb/mlrb/internal/results/runresults"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/store/blob"
)

// StoreResult keeps a run's result in the blob store, where the
// leaderboard and the starter read a benchmark's runs from.
func (a *Records) StoreResult(ctx context.Context, in activities.StoreResultInput) error {
	b, err := a.complete(ctx, in.Result)
	if err != nil {
		return fmt.Errorf("store result of %s: %w", in.RunID, err)
	}
	// The run's record carries its agent's certificate as it stands at
	// the run's end, and so does its bundle.
	var agent struct {
		Def *runs.AgentRef `json:"agent_definition"`
	}
	if json.Unmarshal(b, &agent) == nil && agent.Def != nil && agent.Def.Hash != "" {
		if err := certificate.Record(ctx, a.Engine.Store, in.RunID, agent.Def.Hash); err != nil {
			return err
		}
	}
	return runresults.Put(ctx, a.Engine.Store, in.RunID, b)
}

// complete is the run's result as stored: runresults.Complete, at this
// worker's GPU prices (an unreadable verdict fails it: the activity is
// retried). A result not read is stored as it came.
func (a *Records) complete(ctx context.Context, body json.RawMessage) (json.RawMessage, error) {
	var r runs.Result
	if json.Unmarshal(body, &r) != nil {
		return body, nil
	}
	if err := runresults.Complete(ctx, a.Engine.Store, &r, a.GPUPrices, a.MinExperiment); err != nil {
		return nil, err
	}
	b, err := json.Marshal(&r)
	if err != nil {
		return body, nil
	}
	return b, nil
}

// AggregateResults reads the stored results of an ended benchmark's runs
// and stores its leaderboard as JSON, CSV, Markdown and an SVG chart.
func (a *Records) AggregateResults(ctx context.Context, in activities.AggregateResultsInput) (*activities.AggregateResult, error) {
	all := in.Runs.Runs()
	got, err := runresults.GetAll[leaderboard.Entry](ctx, a.Engine.Store, all, func(n int) { activity.RecordHeartbeat(ctx, n) })
	if err != nil {
		return nil, err
	}
	board := make([]leaderboard.Entry, 0, len(all))
	missing := 0
	for i, r := range got {
		if r == nil {
			// Every run of an ended benchmark has ended: one without a
			// result was cut off, an infra failure, never left out.
			missing++
			r = &leaderboard.Entry{Task: all[i].Task, Agent: all[i].Agent, Seed: all[i].Seed, Outcome: runs.OutcomeInfraFailed}
		}
		board = append(board, *r)
	}
	setup := leaderboard.SetupOf(board, in.Policy)
	keys, err := a.storeLeaderboard(ctx, in.Runs.BenchmarkID, board, setup)
	if err != nil {
		return nil, err
	}
	return &activities.AggregateResult{Keys: keys, Setup: setup, Missing: missing}, nil
}

// awaitHeartbeat is how often AwaitRuns says it is alive.
const awaitHeartbeat = 10 * time.Second

// AwaitRuns waits until at least one of the runs has closed and returns
// every one closed by then: a benchmark that continued as new waits on
// the runs an earlier execution started this way. A run that failed, was
// terminated or timed out ended infra_failed.
func (a *Records) AwaitRuns(ctx context.Context, ids []string) ([]runs.End, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var ends []runs.End
	one := make(chan struct{}, len(ids))
	for _, id := range ids {
		go func() {
			var res runs.Result
			err := a.Client.GetWorkflow(ctx, id, "").Get(ctx, &res)
			if ctx.Err() != nil {
				return
			}
			end := runs.End{RunID: id, Outcome: res.Outcome, Reason: res.Reason}
			var nf *serviceerror.NotFound
			switch {
			case errors.As(err, &nf):
				end = runs.End{RunID: id, Outcome: runs.OutcomeInfraFailed, Reason: "the run is gone from Temporal"}
			case err != nil:
				end = runs.End{RunID: id, Outcome: runs.OutcomeInfraFailed, Reason: err.Error()}
			}
			mu.Lock()
			ends = append(ends, end)
			mu.Unlock()
			one <- struct{}{}
		}()
	}
	tick := time.NewTicker(awaitHeartbeat)
	defer tick.Stop()
	for {
		activity.RecordHeartbeat(ctx, len(ids))
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("await runs: %w", ctx.Err())
		case <-tick.C:
			continue
		case <-one:
		}
		mu.Lock()
		out := slices.Clone(ends)
		mu.Unlock()
		return out, nil
	}
}

// ReadPlan returns the plan entries of the runs asked for (runs not in
// the plan are left out: they continue with nothing carried).
func (a *Records) ReadPlan(ctx context.Context, in activities.ReadPlanInput) (map[string]resume.Entry, error) {
	rc, err := a.Engine.Store.Get(ctx, in.Key)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, fmt.Errorf("resume plan %s is not in the store %s", in.Key, a.Engine.Store)
	}
	if err != nil {
		return nil, fmt.Errorf("resume plan %s: %w", in.Key, err)
	}
	defer rc.Close()
	var plan resume.Entries
	if err := json.NewDecoder(rc).Decode(&plan); err != nil {
		return nil, fmt.Errorf("decode resume plan %s: %w", in.Key, err)
	}
	out := map[string]resume.Entry{}
	for _, id := range in.RunIDs {
		if e, ok := plan[id]; ok {
			out[id] = e
		}
	}
	return out, nil
}
