// LLMGateway is how agents' LLM calls leave this worker.

package attempt

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/subosito/gotenv"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/internal/sandbox/gateway"
	"github.com/mlrb/mlrb/internal/sandbox/transcript"
)

// LLMGateway is how agents' LLM calls leave this worker: priced by
// Prices, sent to the providers with the keys named here, which are read
// from agent.env_file when an attempt starts and never leave the worker.
type LLMGateway struct {
	Prices *llm.Prices
	// OpenAI and Anthropic: their URL and KeyName (Key is read per attempt).
	OpenAI, Anthropic gateway.Upstream
	// ServerTools lets provider-side tools through (gateway.server_tools).
	ServerTools bool
	// AnthropicBeta are the anthropic-beta values passed on
	// (gateway.anthropic_beta).
	AnthropicBeta []string
	// Bounds is what one attempt's calls may hold of the worker
	// (gateway.body_timeout; zero fields: gateway.DefaultBounds').
	Bounds gateway.Bounds
	// UsageEvery is the least time between two reports of an attempt's
	// ledger to its run (gateway.usage_every; 0: UsageEvery).
	UsageEvery time.Duration
	// MaxRefused, MaxRefusedBytes, MaxRecords and MaxConns size each
	// attempt's door (gateway.max_refused, gateway.max_refused_mb,
	// gateway.max_records, gateway.max_connections; 0: the defaults).
	MaxRefused      int64
	MaxRefusedBytes int64
	MaxRecords      int64
	MaxConns        int
}

// attemptLLM is one attempt's side of the gateway: serve holds its token,
// its meter under the run's budget and its transcript.
type attemptLLM struct {
	serve  *gateway.LLM
	prices llm.PriceRef
	// prior are the run's earlier attempts' ledgers, from their transcripts.
	prior map[int]llm.Ledger
	// sent is the ledger last reported to the run, at sentAt.
	sent   llm.Ledger
	sentAt time.Time
	every  time.Duration
	// stopReplay stops the transcript serving a replay's calls (nil:
	// the providers answer).
	stopReplay func()
}

// UsageEvery is the least time between two reports of an attempt's
// ledger to its run (and one when the attempt ends), gateway.usage_every's
// default: each is an event in the run's history, which must grow with
// time, never with the calls an agent makes. A day of calls costs at most
// 1,440 reports, each bounded by the price table's models.
const UsageEvery = time.Minute

// every is the least time between two reports.
func (g LLMGateway) every() time.Duration {
	if g.UsageEvery > 0 {
		return g.UsageEvery
	}
	return UsageEvery
}

// llmFor sets an attempt's gateway up: a fresh token, the provider keys
// from the env file, what the run's earlier attempts spent (from their
// transcripts: a crashed attempt's calls count), and its recorder, which
// scrubs the token, the keys and the run's secrets from what it stores.
func (a *Attempts) llmFor(ctx context.Context, in activities.AgentInput, secrets []string, door *gateway.Allowance, live func() error, log *zap.Logger) (*attemptLLM, error) {
	if def := definition(in); a.LLM.Prices == nil || def.Human && def.Provider == "" {
		// No LLM side: an unassisted person's door serves only their clock.
		return nil, nil
	}
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("attempt token: %w", err)
	}
	token := "mlrb-" + hex.EncodeToString(b)
	oa, an := a.LLM.OpenAI, a.LLM.Anthropic
	if a.EnvFile != "" {
		// Without the file, or a key, the gateway refuses those calls
		// naming the key; the agent still runs.
		if err := config.PrivateFile("agent.env_file", a.EnvFile); err != nil {
			log.Warn("LLM calls are refused", zap.Error(err))
		} else {
			file, err := gotenv.Read(a.EnvFile)
			if err != nil {
				log.Warn("agent.env_file unreadable: LLM calls are refused", zap.String("problem", envFileProblem(a.EnvFile)))
			}
			oa.Key, an.Key = file[oa.KeyName], file[an.KeyName]
		}
	}
	var stopReplay func()
	if in.ReplayOf != "" {
		var err error
		if stopReplay, err = a.replayUpstream(ctx, in.ReplayOf, &oa, &an, log); err != nil {
			return nil, temporal.NewNonRetryableApplicationError(err.Error(), activities.ErrBadTask, err)
		}
	}
	prior, err := transcript.Totals(ctx, a.Runs.Engine.Store, in.RunID, in.Attempt)
	if err != nil {
		return nil, fmt.Errorf("the run's earlier LLM calls: %w", err)
	}
	var spent llm.Ledger
	for _, n := range slices.Sorted(maps.Keys(prior)) {
		spent.Merge(prior[n])
	}
	meter := llm.NewMeter(in.LLMBudget, spent.Usage)
	redact := append([]string{token, oa.Key, an.Key}, secrets...)
	rec := &transcript.Recorder{Store: a.Runs.Engine.Store, RunID: in.RunID, Attempt: in.Attempt, Redact: redact, Ledger: meter.Ledger, Log: log,
		MaxRecords: a.LLM.MaxRecords}
	if door != nil {
		rec.Exceeded = door.Exceeded
	}
	return &attemptLLM{prices: a.LLM.Prices.Ref(), prior: prior, every: a.LLM.every(), stopReplay: stopReplay,
		serve: &gateway.LLM{Token: token, OpenAI: oa, Anthropic: an, Prices: a.LLM.Prices, Meter: meter, Record: rec, Live: live, Log: log, ServerTools: a.LLM.ServerTools, AnthropicBeta: a.LLM.AnthropicBeta, Bounds: a.LLM.Bounds, Allowance: door}}, nil
}

// report sends the attempt's ledger to the run when it changed since the
// last report, at most once in every (gateway.usage_every) unless final.
func (l *attemptLLM) report(n *notifier, attempt int, final bool) {
	if rep := l.due(attempt, final); rep != nil {
		n.send(activities.SignalUsage, *rep)
	}
}

// due is the ledger to report, if it changed since the last report and,
// unless final, every has passed; nil otherwise.
func (l *attemptLLM) due(attempt int, final bool) *activities.UsageReport {
	if l == nil {
		return nil
	}
	now := l.serve.Meter.Ledger()
	if now.Usage == l.sent.Usage || !final && time.Since(l.sentAt) < l.every {
		return nil
	}
	l.sent, l.sentAt = now, time.Now()
	return &activities.UsageReport{Attempt: attempt, Ledger: now, Prices: l.prices}
}

// reportPrior tells the run what its earlier attempts spent, as their
// transcripts say.
func (l *attemptLLM) reportPrior(n *notifier) {
	if l == nil {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(l.prior)) {
		n.send(activities.SignalUsage, activities.UsageReport{Attempt: k, Ledger: l.prior[k], Prices: l.prices})
	}
}

// finish waits for the attempt's calls to be settled and their records
// stored, and reports its final ledger: the agent is gone, but the answer
// to its last call reached it before the call was settled. With hold, it
// returns the report for the attempt's result instead of signalling it.
func (l *attemptLLM) finish(n *notifier, attempt int, hold bool) *activities.UsageReport {
	if l == nil {
		return nil
	}
	l.serve.Wait()
	l.serve.Record.Wait()
	if hold {
		return l.due(attempt, true)
	}
	l.report(n, attempt, true)
	return nil
}

// side is what the attempt's door serves of the gateway (nil: no LLM
// side).
func (l *attemptLLM) side() *gateway.LLM {
	if l == nil {
		return nil
	}
	return l.serve
}

// stopServing stops a replay's transcript server, for an attempt whose
// task never started.
func (l *attemptLLM) stopServing() {
	if l != nil && l.stopReplay != nil {
		l.stopReplay()
	}
}

// spent tells whether the run's LLM budget is spent.
func (l *attemptLLM) spent() bool { return l != nil && l.serve.Meter.Spent() }

// redacting is secrets with the attempt's gateway token: an agent's
// command line may hold either (curl -H "Authorization: Bearer …"), and
// the observation keeps command lines beyond the attempt.
func (l *attemptLLM) redacting(secrets []string) []string {
	if l == nil {
		return secrets
	}
	return append(slices.Clone(secrets), l.serve.Token)
}

// observed lets the attempt's observation know when its calls ran.
func (l *attemptLLM) observed(o *observer) {
	if l != nil {
		l.serve.Record.Seen = o.call
	}
}
