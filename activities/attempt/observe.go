// observer watches one attempt's research from the host (internal/ observe).

package attempt

import (
	"context"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/results/review"
	"github.com/mlrb/mlrb/internal/sandbox/observe"
	"github.com/mlrb/mlrb/internal/sandbox/runtime"
	"github.com/mlrb/mlrb/internal/sandbox/transcript"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
)

// observer watches one attempt's research from the host (internal/
// observe): its processes, its leased GPUs, what its checkpoints add and
// when its LLM calls ran. Its observation is stored beside the
// transcript at checkpoints (at most every observeEvery) and when the
// attempt ends; the run gets aggregates only, from the stored result.
type observer struct {
	a   *Attempts
	in  *activities.AgentInput
	log *zap.Logger

	mu       sync.Mutex
	s        *observe.Sampler
	storedAt time.Time
}

// observeEvery bounds how often a checkpoint stores the observation too:
// a lost worker loses at most this much of it.
const observeEvery = 10 * time.Minute

func (a *Attempts) newObserver(in *activities.AgentInput, log *zap.Logger) *observer {
	return &observer{a: a, in: in, log: log}
}

// begin samples the started task h, if the host can see its processes;
// started is when the attempt's agent time began.
func (o *observer) begin(h runtime.Handle, redact []string, started time.Time) {
	oh, ok := h.(runtime.Observable)
	if !ok {
		o.log.Debug("the agent's processes cannot be seen from this host: not observed")
		return
	}
	var scope observe.Scope = observe.Gone{}
	var err error
	switch {
	case oh.HostPID() == 0:
		// Ended already: a model put in place at once is still seen
		// arriving in its checkpoints.
		o.log.Debug("the agent ended before its processes could be seen")
	case oh.OwnCgroup():
		if scope, err = observe.CgroupOf(oh.HostPID(), cgroupMount); err != nil {
			o.log.Debug("the agent's cgroup is gone", zap.Error(err))
			scope, err = observe.Gone{}, nil
		}
	default:
		scope = &observe.Tree{Root: oh.HostPID()}
	}
	if err == nil {
		opts := o.a.Host.Observe
		opts.Redact, opts.Logger, opts.Watch = redactor(redact), o.log, review.Watched(&o.in.Task)
		var s *observe.Sampler
		s, err = observe.Start(scope, opts, observe.Observation{RunID: o.in.RunID, Attempt: o.in.Attempt, Start: started, StartAgentS: o.in.Budget.UsedS, Devices: o.in.Lease.Devices})
		// storedAt stays zero: the first checkpoint stores the
		// observation, so that a loss soon after it is still seen (what
		// was running goes in the next attempt's resume note).
		o.mu.Lock()
		o.s = s
		o.mu.Unlock()
	}
	if err != nil {
		o.log.Warn("the agent is not observed", zap.Error(err))
	}
}

// cgroupMount is where the host mounts its cgroups.
const cgroupMount = "/sys/fs/cgroup"

func (o *observer) sampler() *observe.Sampler {
	if o == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.s
}

// call records an LLM call's span (the gateway's recorder tells it).
func (o *observer) call(c transcript.Call) {
	// A refused call cost nothing and kept the agent busy for no time.
	if c.Error != "" && c.Usage.USD == 0 {
		return
	}
	if s := o.sampler(); s != nil {
		s.Call(observe.Span{Start: c.Start, End: c.Start.Add(time.Duration(c.LatencyMS * float64(time.Millisecond))), USD: c.Usage.USD})
	}
}

// stopping: the harness began to stop the agent.
func (o *observer) stopping() {
	if s := o.sampler(); s != nil {
		s.Stopping()
	}
}

// checkpoint records what checkpoint m added to prev, and stores the
// observation when the last store is old enough.
func (o *observer) checkpoint(ctx context.Context, prev, m *checkpoint.Manifest) {
	s := o.sampler()
	if s == nil {
		return
	}
	s.Checkpoint(observe.Adds(prev, m))
	o.mu.Lock()
	due := time.Since(o.storedAt) >= observeEvery
	if due {
		o.storedAt = time.Now()
	}
	o.mu.Unlock()
	if due {
		o.store(ctx, s.Snapshot())
	}
}

// finish stops sampling and stores the observation, ended as the
// attempt did ("" for an attempt the run gave up on: its work was lost).
func (o *observer) finish(ctx context.Context, ended string) {
	if s := o.sampler(); s != nil {
		// Stored even when the run gave up on the attempt.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		o.store(sctx, s.Stop(ended))
	}
}

func (o *observer) store(ctx context.Context, obs *observe.Observation) {
	if err := observe.Put(ctx, o.a.Runs.Engine.Store, obs); err != nil {
		o.log.Warn("the attempt's observation is not stored", zap.Error(err))
	}
}

// redactor replaces the attempt's secret values in command lines.
func redactor(secrets []string) func(string) string {
	var pairs []string
	for _, s := range secrets {
		if s != "" {
			pairs = append(pairs, s, "***")
		}
	}
	if len(pairs) == 0 {
		return nil
	}
	r := strings.NewReplacer(pairs...)
	return r.Replace
}
