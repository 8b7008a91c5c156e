package workflows

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/mock"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// TestLLMBudgetSpent: the run's own budget reaches its attempt; the
// attempt's ledger, signalled, becomes the run's measured cost with the
// price table named; reports of an earlier attempt never shrink it; an
// agent stopped for its spent budget is evaluated, and the result says why.
func TestLLMBudgetSpent(t *testing.T) {
	env := newEnv(t)
	prices := llm.PriceRef{SHA256: "abc", Date: "2025-08-01"}
	ledger := func(calls int64, usd float64) llm.Ledger {
		var l llm.Ledger
		l.Record("gpt-4o", llm.Usage{Calls: calls, USD: usd, Tokens: llm.Tokens{Input: 10 * calls, Output: calls}})
		return l
	}
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.AgentInput) (*activities.AgentResult, error) {
			if in.LLMBudget != (llm.Budget{USD: 2.5}) {
				return nil, errors.New("the run's budget did not reach the attempt")
			}
			for _, rep := range []activities.UsageReport{
				{Attempt: 1, Ledger: ledger(3, 1), Prices: prices},
				{Attempt: 1, Ledger: ledger(5, 2.49), Prices: prices},
				{Attempt: 1, Ledger: ledger(4, 2), Prices: prices}, // late and behind: ignored
			} {
				if err := env.SignalWorkflowByID(in.RunID, activities.SignalUsage, rep); err != nil {
					return nil, err
				}
			}
			return committed(env, in, &activities.AgentResult{StoppedBy: activities.StopLLMBudget, AgentSeconds: 7}, ck(1, 7))
		})
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(score(0.4), nil)
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", Policy: testPolicy, LLMBudget: &llm.Budget{USD: 2.5}})
	r := result(t, env)
	if r.Outcome != runs.OutcomeLimitReached || r.Score == nil || !strings.Contains(r.Reason, "LLM budget ($2.50) was spent") {
		t.Fatalf("result %+v", r)
	}
	if c := r.Cost; c.LLM == nil || c.LLM.Calls != 5 || c.LLM.USD != 2.49 || c.LLMPrices == nil || *c.LLMPrices != prices || c.LLMUSD != nil {
		t.Fatalf("cost %+v", r.Cost)
	}
}

func TestNoLLMCallsNoLLMCost(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(agentDone(env, &activities.AgentResult{StoppedBy: activities.StopExited, AgentSeconds: 3}, ck(1, 3)))
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(score(0.5), nil)
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", Policy: testPolicy})
	if r := result(t, env); r.Cost.LLM != nil || r.Outcome != runs.OutcomeScored {
		t.Fatalf("result %+v", r)
	}
}
