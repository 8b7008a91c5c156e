package workflows

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/tasks"
)

// TestAnchorMeasured: an anchor measurement runs one child run per seed,
// with ids of the measurement and the seed (what an interrupted command
// re-attaches to), and stores the mean of their scores with the runs
// that made it; a run without a score stores nothing.
func TestAnchorMeasured(t *testing.T) {
	for _, broken := range []bool{false, true} {
		env := newEnv(t)
		env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(
			agentDone(env, &activities.AgentResult{StoppedBy: activities.StopExited, AgentSeconds: 3}, ck(1, 3)))
		env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(
			func(_ context.Context, in activities.EvalInput) (*activities.EvalResult, error) {
				if broken && in.Seed == 8 {
					return nil, temporal.NewNonRetryableApplicationError("the model crashed the evaluator", activities.ErrModelBrokeEvaluator, nil)
				}
				return score(0.2 + 0.1*float64(in.Seed-6)), nil
			})
		var stored []activities.StoreAnchorInput
		env.OnActivity(activities.StoreAnchorName, mock.Anything, mock.Anything).Return(
			func(_ context.Context, in activities.StoreAnchorInput) error {
				stored = append(stored, in)
				return nil
			})
		id := AnchorID("mini_baby_lm", "baseline")
		env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: id})
		env.ExecuteWorkflow(AnchorWorkflow, AnchorInput{Task: "mini_baby_lm", Role: "baseline", Seeds: []int64{6, 7, 8},
			Run: RunInput{Agent: "noop", Policy: testPolicy}})
		if broken {
			if err := env.GetWorkflowError(); err == nil || !strings.Contains(err.Error(), "without a score") || len(stored) != 0 {
				t.Fatalf("a run without a score: %v, stored %+v", err, stored)
			}
			continue
		}
		var a tasks.Anchor
		if err := env.GetWorkflowResult(&a); err != nil {
			t.Fatal(err)
		}
		want := []string{AnchorRunID(id, 6), AnchorRunID(id, 7), AnchorRunID(id, 8)}
		if math.Abs(a.Score-0.3) > 1e-9 || !slices.Equal(a.Runs, want) || a.RunID != want[0] || a.Agent != "noop" || len(stored) != 1 || stored[0].Anchor.Score != a.Score {
			t.Fatalf("anchor %+v, stored %+v", a, stored)
		}
	}
}
