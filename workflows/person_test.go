package workflows

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/agents"
	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// TestPersonRun: a person's run holds no lease until its person starts
// their clock (resume); an attempt released after a long pause ends
// without the run ending, the wait until the person comes back is paused
// time, and the next attempt resumes from the released one's checkpoint
// with their clock running. Invitations are kept as hashes, checked, and
// refused for an agent's run.
func TestPersonRun(t *testing.T) {
	env := newEnv(t)
	calls := 0
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.AgentInput) (*activities.AgentResult, error) {
			calls++
			if !in.ClockRunning || in.ReleaseAfter != 10*time.Minute {
				return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("attempt %d: the person's clock terms: %+v", calls, in), activities.ErrBadTask, nil)
			}
			if calls == 1 {
				return committed(env, in, &activities.AgentResult{StoppedBy: activities.StopReleased, AgentSeconds: 30, PausedS: 600, Released: true}, ck(1, 30))
			}
			if in.Resume == nil || in.Resume.Seq != 1 || in.Budget.UsedS != 30 {
				return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("attempt 2 must resume checkpoint 1: %+v", in), activities.ErrBadTask, nil)
			}
			return committed(env, in, &activities.AgentResult{StoppedBy: activities.StopExited, AgentSeconds: 50,
				Notes: []contract.Note{{AgentS: 40, Text: "bigger n"}}}, ck(2, 50))
		})
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(score(0.6), nil)
	var waiting, released Status
	var badHash, accepted error
	hash := strings.Repeat("ab", 32)
	env.RegisterDelayedCallback(func() {
		v, _ := env.QueryWorkflow(QueryStatus)
		_ = v.Get(&waiting)
		env.UpdateWorkflow(UpdateInvite, "bad", &testsuite.TestUpdateCallback{OnReject: func(err error) { badHash = err }, OnAccept: func() {}, OnComplete: func(any, error) {}},
			Invite{Hash: "not-a-hash", Label: "alice"})
		env.UpdateWorkflow(UpdateInvite, "good", &testsuite.TestUpdateCallback{OnReject: func(err error) { accepted = err }, OnAccept: func() {}, OnComplete: func(any, error) {}},
			Invite{Hash: hash, Label: "alice"})
		env.UpdateWorkflow(UpdateResume, "come", &testsuite.TestUpdateCallback{OnReject: func(err error) { t.Error(err) }, OnAccept: func() {}, OnComplete: func(any, error) {}})
	}, time.Hour)
	env.RegisterDelayedCallback(func() {
		v, _ := env.QueryWorkflow(QueryStatus)
		_ = v.Get(&released)
		env.UpdateWorkflow(UpdateResume, "back", &testsuite.TestUpdateCallback{OnReject: func(err error) { t.Error(err) }, OnAccept: func() {}, OnComplete: func(any, error) {}})
	}, 3*time.Hour)
	def := agents.Definition{Name: "person", Human: true, Image: "mlrb-human"}
	pol := testPolicy
	pol.ReleaseAfter = 10 * time.Minute
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "person", AgentDef: &def, Policy: pol})
	r := result(t, env)
	if waiting.Phase != runs.PhaseAwaitingPerson || released.Phase != runs.PhaseAwaitingPerson || released.Budget.UsedS != 30 {
		t.Fatalf("phases while the person was away: %s, then %s at %.0fs", waiting.Phase, released.Phase, released.Budget.UsedS)
	}
	if badHash == nil || accepted != nil {
		t.Fatalf("invitations: a bad hash gave %v, a good one %v", badHash, accepted)
	}
	// An hour before the person came, two hours after the release, and
	// the 10 minutes paused in the first attempt: never agent time.
	if r.Outcome != runs.OutcomeScored || r.Budget.UsedS != 50 || r.Budget.PausedS < 3*3600 || r.Budget.PausedS > 3*3600+700 || len(r.Notes) != 1 || r.AgentDef.Human != runs.Unassisted {
		t.Fatalf("result = %+v", r)
	}
}

// TestAgentRunTakesNoInvitation: nobody attaches to an agent's run (here
// one waiting for an evaluation retry).
func TestAgentRunTakesNoInvitation(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.AgentInput) (*activities.AgentResult, error) {
			return committed(env, in, &activities.AgentResult{StoppedBy: activities.StopExited, AgentSeconds: 5}, ck(1, 5))
		})
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(nil, temporal.NewApplicationError("evaluator down", "x"))
	var refused error
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(UpdateInvite, "x", &testsuite.TestUpdateCallback{OnReject: func(err error) { refused = err }, OnAccept: func() {}, OnComplete: func(any, error) {}},
			Invite{Hash: strings.Repeat("ab", 32), Label: "alice"})
	}, time.Hour)
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", Policy: testPolicy})
	result(t, env)
	if refused == nil || !strings.Contains(refused.Error(), "agent's") {
		t.Fatalf("an invitation to an agent's run: %v", refused)
	}
}
