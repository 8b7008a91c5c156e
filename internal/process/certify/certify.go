// Certify: the scenarios an agent is put through, on a worker of its own, and their verdicts.

// Package certify is `starter certify`: an agent's definition run
// through the agent contract's scenarios, each a real run on a worker of
// its own (a plain run, SIGTERM at the deadline, the worker SIGKILLed
// mid-run and the run resumed, the deadline extended while it runs, the
// sandbox), and a certificate of what it passed, with the evidence,
// kept with the definition's hash.
package certify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/mlrb/mlrb/agents"
	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/process/app"
	"github.com/mlrb/mlrb/internal/results/certificate"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
	"github.com/mlrb/mlrb/workflows"
)

// Options are one certification's.
type Options struct {
	Agent agents.Definition
	// Task is the mini task the scenarios run (mini_baby_lm unless named).
	Task string
	// TimeLimit is the plain and the resumed runs' budget; Short the
	// SIGTERM and extended runs', which the agent must still be working
	// at; ExtendBy what the extended run is given a quarter of Short in,
	// so that the worker's reads of the run's controls (controlsEvery)
	// see it well before the SIGTERM.
	TimeLimit, Short, ExtendBy time.Duration
	// WorkerBin is the worker binary the scenarios run on.
	WorkerBin string
	Config    *config.Config
	Store     blob.Store
	// Progress is told each step as it happens.
	Progress io.Writer
}

// Scenario runs: their seeds tell them apart in the store.
const (
	seedPlain  = 1
	seedTerm   = 2
	seedExtend = 3
	seedResume = 4
)

// Checkpoint and heartbeat settings of the scenario runs: quick, so a
// crash is found and resumed in seconds.
const (
	checkpointEvery = 2 * time.Second
	heartbeatAfter  = 5 * time.Second
	controlsEvery   = time.Second
)

// Run certifies o.Agent: the worker started, the scenarios run, the
// certificate built and kept in the store.
func Run(ctx context.Context, o Options) (*certificate.Certificate, error) {
	suffix := fmt.Sprintf("%x", time.Now().UnixNano()&0xffffff)
	w, err := newWorker(o.WorkerBin, o.Config, "certify-"+suffix, o.Store)
	if err != nil {
		return nil, err
	}
	defer w.stop()
	if err := w.start(); err != nil {
		return nil, err
	}
	c, err := w.dial(ctx, *o.Config)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	s := &session{o: o, c: c, w: w, prefix: "certify-" + o.Agent.Name + "-" + suffix}
	cert, err := s.scenarios(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w\nthe worker's log ends:\n%s", err, w.logTail())
	}
	return cert, certificate.Keep(ctx, o.Store, cert)
}

// session is one certification under way.
type session struct {
	o      Options
	c      client.Client
	w      *worker
	prefix string
	// restored is the crashed run's last checkpoint at the crash.
	restored *checkpoint.Manifest
}

func (s *session) say(format string, a ...any) {
	if s.o.Progress != nil {
		fmt.Fprintf(s.o.Progress, format+"\n", a...)
	}
}

// scenarios runs the plain, SIGTERM and extended runs at once, then the
// crash alone (a worker's death takes every run on it).
func (s *session) scenarios(ctx context.Context) (*certificate.Certificate, error) {
	plain, err := s.start(ctx, "plain", seedPlain, s.o.TimeLimit)
	if err != nil {
		return nil, err
	}
	term, err := s.start(ctx, "sigterm", seedTerm, s.o.Short)
	if err != nil {
		return nil, err
	}
	ext, err := s.start(ctx, "extend", seedExtend, s.o.Short)
	if err != nil {
		return nil, err
	}
	extendErr := s.extendAt(ctx, ext, s.o.Short/4)
	results := map[string]*runs.Result{}
	for name, id := range map[string]string{"plain": plain, "sigterm": term, "extend": ext} {
		if results[name], err = s.await(ctx, id); err != nil {
			return nil, err
		}
		s.say("%s: %s (%s)", name, results[name].Outcome, id)
	}
	res, err := s.crashAndResume(ctx)
	if err != nil {
		return nil, err
	}
	results["resume"] = res
	cert := &certificate.Certificate{Agent: s.o.Agent.Name, DefinitionHash: s.o.Agent.Hash(), Task: s.o.Task, At: time.Now().UTC(), Runtime: string(s.o.Config.Host.Runtime)}
	if r := results["plain"]; r.AgentDef != nil {
		cert.Image = r.AgentDef.Image
	}
	ev := &evidence{store: s.o.Store, cfg: s.o.Config}
	// What the agent does with a far deadline tells what it would have
	// done with the near ones.
	unhurried := results["plain"].Budget.UsedS
	cert.Checks = []certificate.Check{
		ev.plain(ctx, results["plain"]),
		ev.sigterm(ctx, results["sigterm"], unhurried, s.o.Short, s.o.Config.Agent.Grace),
		ev.resume(ctx, results["resume"], s.restored),
		ev.extend(ctx, results["extend"], unhurried, s.o.Short, <-extendErr),
		ev.sandbox(ctx, results["plain"]),
	}
	return cert, nil
}

// start starts one scenario's run.
func (s *session) start(ctx context.Context, name string, seed int64, limit time.Duration) (string, error) {
	def := s.o.Agent
	p := app.Policy(s.o.Config)
	p.CheckpointInterval, p.HeartbeatTimeout, p.NoCurve = checkpointEvery, heartbeatAfter, true
	in := workflows.RunInput{Task: s.o.Task, Agent: def.Name, Seed: seed, TimeLimit: limit, AgentDef: &def, Image: def.Image,
		LLMProvider: def.Provider, LLMBudget: def.Budget(nil), Policy: p}
	id := s.prefix + "-" + name
	_, err := app.StartRun(ctx, s.c, s.o.Config.Temporal.TaskQueue, id, in, map[string]any{"certify": name})
	if err != nil {
		return "", fmt.Errorf("start the %s run: %w", name, err)
	}
	s.say("%s: started %s (%s)", name, id, limit)
	return id, nil
}

// await waits for a run's result.
func (s *session) await(ctx context.Context, id string) (*runs.Result, error) {
	var res runs.Result
	if err := s.c.GetWorkflow(ctx, id, "").Get(ctx, &res); err != nil {
		return nil, fmt.Errorf("run %s: %w", id, err)
	}
	return &res, nil
}

// extendAt extends run id by ExtendBy once after has passed since its
// attempt started, as `starter extend` does; the error comes on the
// channel (nil: extended).
func (s *session) extendAt(ctx context.Context, id string, after time.Duration) <-chan error {
	out := make(chan error, 1)
	go func() {
		if _, err := s.waitStatus(ctx, id, func(st workflows.Status) bool {
			return st.Phase == runs.PhaseRunning && !st.AttemptStartedAt.IsZero() && time.Since(st.AttemptStartedAt) >= after
		}); err != nil {
			out <- err
			return
		}
		h, err := s.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: workflows.UpdateExtend,
			Args: []any{workflows.Extend{By: s.o.ExtendBy}}, WaitForStage: client.WorkflowUpdateStageCompleted})
		if err == nil {
			err = h.Get(ctx, nil)
		}
		if err == nil {
			s.say("extend: %s extended by %s while it ran", id, s.o.ExtendBy)
		}
		out <- err
	}()
	return out
}

// errEndedFirst: the run ended before the state a scenario waits for.
var errEndedFirst = errors.New("the run ended before the scenario's moment")

// waitStatus polls a run's status until ok, for up to 5 minutes, or
// until the run ends (errEndedFirst).
func (s *session) waitStatus(ctx context.Context, id string, ok func(workflows.Status) bool) (workflows.Status, error) {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var st workflows.Status
		v, err := s.c.QueryWorkflow(ctx, id, "", workflows.QueryStatus)
		if err == nil && v.Get(&st) == nil && ok(st) {
			return st, nil
		}
		if st.Outcome != "" {
			return st, fmt.Errorf("%w: run %s ended %s first", errEndedFirst, id, st.Outcome)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return st, fmt.Errorf("run %s never reached the state the scenario waits for (phase %s)", id, st.Phase)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// crashAndResume runs the crash scenario: the worker SIGKILLed once the
// run has two checkpoints and has worked past the second, then started
// again; the run resumes from its last checkpoint.
func (s *session) crashAndResume(ctx context.Context) (*runs.Result, error) {
	id, err := s.start(ctx, "resume", seedResume, s.o.TimeLimit)
	if err != nil {
		return nil, err
	}
	st, err := s.waitStatus(ctx, id, func(st workflows.Status) bool { return st.Phase == runs.PhaseRunning && st.Checkpoints >= 2 })
	if errors.Is(err, errEndedFirst) {
		// Done before a crash could take it: its result says so, with
		// one attempt, and the check does not apply.
		s.say("resume: %s ended before its second checkpoint; no crash", id)
		return s.await(ctx, id)
	}
	if err != nil {
		return nil, err
	}
	time.Sleep(checkpointEvery / 2)
	s.w.kill()
	// What the resumed attempt gets is the lost one's last checkpoint:
	// kept now, as retention may prune it before the run ends.
	ev := &evidence{store: s.o.Store, cfg: s.o.Config}
	if ms := ev.manifests(ctx, id); len(ms) > 0 {
		s.restored = ms[len(ms)-1]
	}
	s.say("resume: the worker SIGKILLed at checkpoint %d of %s; starting it again", st.Checkpoints, id)
	if err := s.w.start(); err != nil {
		return nil, err
	}
	c, err := s.w.dial(ctx, *s.o.Config)
	if err != nil {
		return nil, err
	}
	s.c.Close()
	s.c = c
	res, err := s.await(ctx, id)
	if err == nil {
		s.say("resume: %s after %d attempts (%s)", res.Outcome, res.Attempts, id)
	}
	return res, err
}
