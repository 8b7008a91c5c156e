// Agent is one attempt of the research agent.

package researcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/tasks"
)

// Agent is one attempt of the research agent.
type Agent struct {
	Env   contract.Env
	Spec  *tasks.Spec
	Model Model
	// ModelName and API are what the conversation is held with.
	ModelName, API string
	// Window is the model's context window in tokens; MaxOutput the
	// output bound of each call.
	Window, MaxOutput int64
	// Prices cost the calls for the model's notes (the gateway's ledger
	// is the run's account).
	Prices *llm.Prices
	// NoteEvery is how often the model is told its time and budget.
	NoteEvery time.Duration
	Log       io.Writer
	// RetryWait is the pause after a failed step (10 s), times the
	// failures in a row.
	RetryWait time.Duration

	mu     sync.Mutex // state, which job goroutines update
	state  *State
	jobs   *jobs
	tools  []tool
	python string
	noCall int
	// margin is this attempt's stopMargin.
	margin time.Duration
}

// Bounds of the loop.
const (
	// stopMargin is the time kept before the deadline to submit: a tenth
	// of a short budget, at least a second (margin).
	stopMargin = 20 * time.Second
	// maxIdleTurns: turns in a row without a tool call end the work.
	maxIdleTurns = 3
	// maxFailures: failed calls in a row (after the SDK's own retries)
	// end the attempt, for the worker to retry.
	maxFailures = 5
)

// Run works until the model says it is done, the deadline nears, the
// LLM budget is spent or ctx ends (SIGTERM); then the best model so far
// is submitted and usage.json written.
func (a *Agent) Run(ctx context.Context) error {
	if err := a.begin(); err != nil {
		return err
	}
	var runErr error
	failures := 0
	for !a.state.Done && ctx.Err() == nil && time.Until(a.Env.CurrentDeadline()) > a.margin {
		err := a.step(ctx)
		switch {
		case err == nil:
			failures = 0
			continue
		case errors.Is(err, ErrRefused):
			a.logf("stopping LLM calls: %v", err)
			a.waitJobs(ctx)
		case ctx.Err() != nil:
		default:
			if failures++; failures < maxFailures {
				a.logf("step failed (%d in a row): %v", failures, err)
				sleep(ctx, time.Duration(failures)*a.retryWait())
				continue
			}
			runErr = err
		}
		break
	}
	if ctx.Err() != nil {
		a.logf("stopping on signal: submitting the best so far")
	}
	if err := a.finish(); err != nil && runErr == nil {
		runErr = err
	}
	return runErr
}

// begin loads the state a checkpoint restored, or starts a conversation.
func (a *Agent) begin() error {
	a.jobs = newJobs(a.Env.Workdir)
	a.margin = min(stopMargin, max(time.Second, time.Until(a.Env.CurrentDeadline())/10))
	a.tools = a.toolset()
	if a.Window == 0 {
		a.Window = Window(a.ModelName)
	}
	if a.MaxOutput == 0 {
		a.MaxOutput = defaultMaxOutput
	}
	st, err := LoadState(a.Env.Workdir)
	if err != nil {
		return err
	}
	if st == nil {
		sys, err := a.systemPrompt()
		if err != nil {
			return err
		}
		a.state = &State{Version: stateVersion, Model: a.ModelName, API: a.API, System: sys, Jobs: map[string]*Job{},
			Attempts: []int{a.Env.Attempt}, LastNote: time.Now().UTC()}
		a.state.Messages = []Message{{Role: RoleUser, Text: a.firstMessage()}}
		a.logf("new conversation with %s over %s (window %d tokens)", a.ModelName, a.API, a.Window)
		return a.save()
	}
	a.state = st
	a.resume()
	return a.save()
}

// resume continues a restored conversation: the calls a crash cut off
// get a result saying so, the jobs it killed are marked lost, and the
// model is told what the worker's resume note says.
func (a *Agent) resume() {
	s := a.state
	interrupted := pending(s.Messages)
	for _, c := range interrupted {
		s.Messages = append(s.Messages, Message{Role: RoleTool, CallID: c.ID, Tool: c.Name, Error: true,
			Text: "error: interrupted: the attempt running this call died before it returned; its effects after the last checkpoint are lost"})
	}
	lost := s.lostJobs(a.Env.Attempt)
	s.Attempts = append(s.Attempts, a.Env.Attempt)
	s.Messages = append(s.Messages, Message{Role: RoleUser, Text: a.resumeMessage(lost, interrupted)})
	a.logf("resumed the conversation of attempts %v at step %d: %d messages, %d call(s) interrupted, %d job(s) lost",
		s.Attempts[:len(s.Attempts)-1], s.Steps, len(s.Messages), len(interrupted), len(lost))
}

// step is one turn: the model is called, each tool call run, and the
// state saved after the reply and after every result.
func (a *Agent) step(ctx context.Context) error {
	if now := time.Now(); a.NoteEvery > 0 && now.Sub(a.state.LastNote) >= a.NoteEvery {
		a.mu.Lock()
		a.state.Messages = append(a.state.Messages, Message{Role: RoleUser, Text: a.progress(now)})
		a.state.LastNote = now.UTC()
		a.mu.Unlock()
	}
	if err := a.fit(ctx); err != nil {
		return err
	}
	reply, err := a.send(ctx, a.state.Messages)
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.state.Steps++
	a.state.Messages = append(a.state.Messages, reply.Message)
	a.mu.Unlock()
	if err := a.save(); err != nil {
		return err
	}
	if len(reply.Message.Calls) == 0 {
		return a.idle()
	}
	a.noCall = 0
	for _, c := range reply.Message.Calls {
		res := a.call(ctx, c)
		a.mu.Lock()
		a.state.Messages = append(a.state.Messages, res)
		a.mu.Unlock()
		if err := a.save(); err != nil {
			return err
		}
	}
	return nil
}

// idle answers a turn without a tool call: the agent works through
// tools, and a model that stops calling them has stopped working.
func (a *Agent) idle() error {
	if a.noCall++; a.noCall >= maxIdleTurns {
		a.logf("%d turns without a tool call: stopping", a.noCall)
		a.mu.Lock()
		a.state.Done = true
		a.mu.Unlock()
		return a.save()
	}
	a.mu.Lock()
	a.state.Messages = append(a.state.Messages, Message{Role: RoleUser, Text: "[mlrb] Go on with the tools; submit with done=true when you are finished."})
	a.mu.Unlock()
	return a.save()
}

// send calls the model and counts the call.
func (a *Agent) send(ctx context.Context, msgs []Message) (Reply, error) {
	req := Request{System: a.state.System, Messages: msgs, Tools: a.specs(), MaxOutput: a.MaxOutput}
	reply, err := a.Model.Send(ctx, req)
	if err != nil {
		return reply, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.state
	s.Calls++
	s.InputTokens += reply.Context
	s.OutTokens += reply.Output
	s.Context, s.ContextBytes = reply.Context, requestBytes(s.System, msgs, req.Tools)
	if a.Prices != nil {
		if p, ok := a.Prices.Lookup(a.ModelName); ok {
			s.CostUSD += p.Cost(llm.Tokens{Input: reply.Context, Output: reply.Output})
		}
	}
	return reply, nil
}

func (a *Agent) specs() []ToolSpec {
	out := make([]ToolSpec, len(a.tools))
	for i, t := range a.tools {
		out[i] = t.spec
	}
	return out
}

func (a *Agent) save() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.state.Save(a.Env.Workdir)
}

// waitJobs lets the jobs of this attempt run out when no call can be
// made: what they train may still be submitted.
func (a *Agent) waitJobs(ctx context.Context) {
	for a.jobs.running() > 0 && ctx.Err() == nil && time.Until(a.Env.CurrentDeadline()) > a.margin {
		sleep(ctx, time.Second)
	}
}

// finish submits the last submission, or output/model when the model
// never submitted one that holds, and writes usage.json.
func (a *Agent) finish() error {
	a.mu.Lock()
	sub := a.state.Submitted
	a.mu.Unlock()
	if sub == "" || a.writeSubmission(sub) != nil {
		if err := a.writeSubmission(filepath.Join(contract.OutputDir, "model")); err == nil {
			sub = contract.OutputDir + "/model"
		} else {
			a.logf("no model to submit: %v", err)
			sub = ""
		}
	}
	in, out, cost := a.state.InputTokens, a.state.OutTokens, a.state.CostUSD
	b, _ := json.Marshal(contract.SelfReport{InputTokens: &in, OutputTokens: &out, CostUSD: &cost})
	if err := os.WriteFile(filepath.Join(a.Env.OutputDir(), contract.UsageFile), b, 0o644); err != nil {
		return fmt.Errorf("usage.json: %w", err)
	}
	a.mu.Lock()
	a.state.Submitted = sub
	a.mu.Unlock()
	a.logf("finished after %d steps and %d calls; submitted %q", a.state.Steps, a.state.Calls, sub)
	return a.save()
}

func (a *Agent) logf(format string, args ...any) {
	if a.Log != nil {
		_, _ = fmt.Fprintf(a.Log, time.Now().UTC().Format(time.RFC3339)+" researcher: "+format+"\n", args...)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// retryWait is the pause after a failed step, times the failures in a
// row.
func (a *Agent) retryWait() time.Duration {
	if a.RetryWait > 0 {
		return a.RetryWait
	}
	return 10 * time.Second
}
