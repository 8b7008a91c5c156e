// Aggregate: the benchmark's leaderboard activity.

package records

import (
	"bytes"
	"context"
	"fmt"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/results/anchors"
	"github.com/mlrb/mlrb/internal/results/leaderboard"
	"github.com/mlrb/mlrb/internal/store/keys"
)

// Aggregate computes the leaderboard from the run results and stores it in
// the blob store as JSON, CSV, Markdown and an SVG chart; it returns the
// keys written.
//
// Benchmarks started before results were stored per run pass their runs
// here; later ones call AggregateResults.
func (a *Records) Aggregate(ctx context.Context, in activities.AggregateInput) ([]string, error) {
	return a.storeLeaderboard(ctx, in.BenchmarkID, in.Runs, in.Setup)
}

// storeLeaderboard stores the leaderboard in every format, each row's gap
// closed against its task's anchors (the store's, else the catalog's).
func (a *Records) storeLeaderboard(ctx context.Context, benchmarkID string, runs []leaderboard.Entry, setup leaderboard.Setup) ([]string, error) {
	if a.Catalog != nil {
		taskIDs := make([]string, len(runs))
		for i, r := range runs {
			taskIDs[i] = r.Task
		}
		var err error
		if setup.Anchors, err = anchors.ForLeaderboard(ctx, a.Engine.Store, a.Catalog, taskIDs); err != nil {
			return nil, err
		}
	}
	var stored []string
	board := leaderboard.Build(runs, setup)
	for _, format := range []string{"json", "csv", "md", "svg"} {
		var b bytes.Buffer
		if err := leaderboard.Write(&b, format, benchmarkID, board); err != nil {
			return nil, fmt.Errorf("leaderboard %s: %w", format, err)
		}
		if err := a.Engine.Store.Put(ctx, keys.Leaderboard(benchmarkID, format), bytes.NewReader(b.Bytes())); err != nil {
			return nil, fmt.Errorf("store leaderboard: %w", err)
		}
		stored = append(stored, keys.Leaderboard(benchmarkID, format))
	}
	return stored, nil
}
