// attemptHooks are what a supervised attempt does beyond its agent.

package attempt

import (
	"context"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/activities/host"
	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/sandbox/workspace"
	"github.com/mlrb/mlrb/internal/store/logstore"
)

// attemptHooks are what a supervised attempt does beyond its agent.
type attemptHooks struct {
	a     *Attempts
	lease string // the attempt's lease token
	// keepLease: an attempt that ends keeps its lease for the evaluations.
	keepLease bool
	ctx       context.Context
	at        *workspace.Attempt
	ck        *checkpointer
	lv        *host.Liveness
	logs      *logstore.Shipper
	log       *zap.Logger
	// shipping is the log shipment in flight: a slow store delays the
	// logs, never the supervisor.
	shipping chan struct{}
	// answers carries the reads of the run's controls, reading is set
	// while one is in flight: a slow query delays a control, never the
	// supervisor.
	answers chan steering
	reading atomic.Bool
	// llm is the attempt's side of the gateway (nil: none), notes the
	// run's signals its ledger goes by.
	llm   *attemptLLM
	notes *notifier
	// ob observes the attempt's research (internal/sandbox/observe).
	ob *observer
	// closeDoor shuts the agent's door before its observation and ledger
	// are settled: a call or connection still open then is recorded (and
	// observed) before either is taken as whole.
	closeDoor func()
}

// stopping: the supervisor began to stop the agent.
func (k *attemptHooks) stopping() { k.ob.stopping() }

func (k *attemptHooks) llmSpent() bool { return k.llm.spent() }

func (k *attemptHooks) reportUsage() { k.llm.report(k.notes, k.at.N, false) }

func (k *attemptHooks) reached(agentSeconds float64) { k.lv.Agent(agentSeconds) }

func (k *attemptHooks) checkpoint(agentSeconds float64) { k.ck.start(k.ctx, agentSeconds) }

func (k *attemptHooks) shipLogs() {
	if k.shipping != nil {
		select {
		case <-k.shipping:
		default:
			return // the last shipment is still going
		}
	}
	done := make(chan struct{})
	k.shipping = done
	go func() {
		defer close(done)
		if err := k.logs.Ship(k.ctx, false); err != nil {
			k.log.Warn("log segment not stored", zap.Error(err))
		}
	}()
}

// shipLastLogs ships the rest of the log once the agent has ended.
func (k *attemptHooks) shipLastLogs() {
	if k.shipping != nil {
		<-k.shipping
	}
	if err := k.logs.Ship(k.ctx, true); err != nil {
		k.log.Warn("log segment not stored", zap.Error(err))
	}
}

func (k *attemptHooks) askSteering() {
	if k.a.Client == nil || !k.reading.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer k.reading.Store(false)
		st, ok := k.readSteering()
		if !ok {
			return
		}
		select {
		case k.answers <- st:
		default: // an answer not taken yet: the loop has ended or takes that one
		}
	}()
}

func (k *attemptHooks) steered() <-chan steering { return k.answers }

// readSteering queries the run for its controls (ok false: not known now).
func (k *attemptHooks) readSteering() (steering, bool) {
	info := activity.GetInfo(k.ctx)
	qctx, cancel := context.WithTimeout(k.ctx, steeringTimeout)
	defer cancel()
	v, err := k.a.Client.QueryWorkflow(qctx, info.WorkflowExecution.ID, info.WorkflowExecution.RunID, activities.QuerySteering)
	if err != nil {
		return steering{}, false
	}
	var st activities.Steering
	if v.Get(&st) != nil {
		return steering{}, false
	}
	return steering{grantedS: st.GrantedS, cancel: st.CancelRequested}, true
}

func (k *attemptHooks) overLimit() string { return k.at.Allow.Over() }

func (k *attemptHooks) deadlineMoved(hard time.Time) {
	if err := contract.WriteDeadline(k.at.Control(), hard); err != nil {
		k.log.Warn("the agent's deadline file", zap.Error(err))
	}
}

// steeringTimeout bounds one read of the operator's controls; a slow
// server only delays an extension by a poll.
const steeringTimeout = 3 * time.Second
