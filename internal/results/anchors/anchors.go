// A task's anchors measured and stored, and read back over the catalog's.

// Package anchors keeps the reference scores the leaderboard measures the
// gap closed against: a task's baseline and top, each measured here
// (`starter anchors measure`, stored in the blob store with the run and
// evaluator that produced it) or given in the task's catalog entry. A
// measurement in the store wins over the catalog's.
package anchors

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mlrb/mlrb/internal/results/leaderboard"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/keys"
	"github.com/mlrb/mlrb/tasks"
)

// Roles of an anchor.
const (
	Baseline = "baseline"
	Top      = "top"
)

// CheckRole refuses a role that is neither.
func CheckRole(role string) error {
	if role != Baseline && role != Top {
		return fmt.Errorf("role %q is not %s or %s", role, Baseline, Top)
	}
	return nil
}

// key is where a task's measured anchor of role is: anchors/<task>/<role>.json.
func key(task, role string) string {
	return keys.Anchor(task, role)
}

// maxAnchor caps what is read of one stored anchor.
const maxAnchor = 1 << 20

// Put stores a measured anchor.
func Put(ctx context.Context, s blob.Store, task, role string, a tasks.Anchor) error {
	if err := CheckRole(role); err != nil {
		return err
	}
	if err := a.Check(role); err != nil {
		return err
	}
	b, err := json.MarshalIndent(a, "", "  ")
	if err != nil {
		return err
	}
	if err := s.Put(ctx, key(task, role), bytes.NewReader(b)); err != nil {
		return fmt.Errorf("store the %s anchor of %s: %w", role, task, err)
	}
	return nil
}

// Get reads a task's stored anchor of role (nil when none is stored).
func Get(ctx context.Context, s blob.Store, task, role string) (*tasks.Anchor, error) {
	var a tasks.Anchor
	err := blob.ReadJSON(ctx, s, key(task, role), maxAnchor, &a)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the %s anchor of %s: %w", role, task, err)
	}
	return &a, nil
}

// Of is a task's anchors: each role's stored measurement, else the
// catalog's (either may be nil).
func Of(ctx context.Context, s blob.Store, spec *tasks.Spec) (tasks.Anchors, error) {
	var out tasks.Anchors
	if spec.Anchors != nil {
		out = *spec.Anchors
	}
	for role, dst := range map[string]**tasks.Anchor{Baseline: &out.Baseline, Top: &out.Top} {
		a, err := Get(ctx, s, spec.ID, role)
		if err != nil {
			return out, err
		}
		if a != nil {
			*dst = a
		}
	}
	return out, nil
}

// ForLeaderboard are the anchors of the tasks (named once or more) that
// have both, as the leaderboard takes them. A task the catalog does not
// know has none.
func ForLeaderboard(ctx context.Context, s blob.Store, cat *tasks.Catalog, taskIDs []string) (map[string]leaderboard.Anchor, error) {
	out := map[string]leaderboard.Anchor{}
	seen := map[string]bool{}
	for _, id := range taskIDs {
		if seen[id] {
			continue
		}
		seen[id] = true
		spec, err := cat.Get(id)
		if err != nil {
			continue
		}
		a, err := Of(ctx, s, spec)
		if err != nil {
			return nil, err
		}
		if a.Baseline == nil || a.Top == nil {
			continue
		}
		la := leaderboard.Anchor{Baseline: a.Baseline.Score, Top: a.Top.Score,
			Source: "baseline " + Describe(a.Baseline) + "; top " + Describe(a.Top)}
		for _, x := range []*tasks.Anchor{a.Baseline, a.Top} {
			if x.Evaluator != "" && !slices.Contains(la.Evaluators, x.Evaluator) {
				la.Evaluators = append(la.Evaluators, x.Evaluator)
			}
		}
		out[id] = la
	}
	return out, nil
}

// Describe says where an anchor comes from.
func Describe(a *tasks.Anchor) string {
	if a.RunID == "" {
		return "cited: " + a.Citation
	}
	parts := []string{"run " + a.RunID}
	if len(a.Runs) > 1 {
		parts = []string{fmt.Sprintf("mean of %d runs (%s)", len(a.Runs), strings.Join(a.Runs, ", "))}
	}
	if a.Agent != "" {
		parts = append(parts, "agent "+a.Agent)
	}
	if a.TimeLimit > 0 {
		parts = append(parts, "budget "+a.TimeLimit.D().String())
	}
	parts = append(parts, "evaluator "+a.Evaluator)
	return strings.Join(parts, ", ")
}
