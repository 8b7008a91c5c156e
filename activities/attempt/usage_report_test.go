package attempt

import (
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/internal/sandbox/gateway"
)

// An attempt reports its ledger when it changed and its interval
// (gateway.usage_every) has passed since the last report, or at its end.
func TestUsageReportsSpacedByTheInterval(t *testing.T) {
	every := (LLMGateway{UsageEvery: 5 * time.Second}).every()
	if every != 5*time.Second || (LLMGateway{}).every() != UsageEvery {
		t.Fatalf("every = %s, unset %s", every, (LLMGateway{}).every())
	}
	m := llm.NewMeter(llm.Budget{}, llm.Usage{})
	l := &attemptLLM{serve: &gateway.LLM{Meter: m}, every: every}
	call := func() { m.Record("", llm.Usage{Refused: 1}) }
	call()
	if l.due(1, false) == nil {
		t.Fatal("the first change is not reported")
	}
	call()
	l.sentAt = time.Now().Add(-every / 2)
	if l.due(1, false) != nil {
		t.Fatal("reported before its interval passed")
	}
	if l.due(1, true) == nil {
		t.Fatal("the attempt's end is not reported")
	}
	call()
	l.sentAt = time.Now().Add(-every - time.Second)
	if r := l.due(1, false); r == nil || r.Ledger.Usage.Refused != 3 {
		t.Fatalf("after the interval: %+v", r)
	}
	if l.due(1, true) != nil {
		t.Fatal("an unchanged ledger is reported again")
	}
}
