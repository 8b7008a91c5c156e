package workflows

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// TestCrashRefundsLostTime: the first attempt commits a checkpoint at 4 s,
// heartbeats up to 6.5 s and is lost; the 2.5 s past the checkpoint are
// refunded and the second attempt resumes from checkpoint 1.
func TestCrashRefundsLostTime(t *testing.T) {
	env := newEnv(t)
	calls := 0
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.AgentInput) (*activities.AgentResult, error) {
			calls++
			if calls == 1 {
				return nil, temporal.NewHeartbeatTimeoutError(activities.Heartbeat{AgentSeconds: 6.5})
			}
			if in.Attempt != 2 || in.Resume == nil || in.Resume.Seq != 1 || in.Budget.UsedS != 4 || in.NextSeq != 2 {
				return nil, temporal.NewNonRetryableApplicationError("bad resume input", activities.ErrBadTask, nil)
			}
			return committed(env, in, &activities.AgentResult{StoppedBy: activities.StopExited, AgentSeconds: 15}, ck(2, 15))
		})
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(activities.SignalCheckpoint, ck(1, 4))
	}, 0)
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(score(0.7), nil)
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", Policy: testPolicy})
	r := result(t, env)
	if r.Outcome != runs.OutcomeScored || r.Attempts != 2 || r.Checkpoints != 2 {
		t.Fatalf("result = %+v", r)
	}
	if r.Budget.LostS != 2.5 || r.Budget.UsedS != 15 {
		t.Fatalf("budget = %+v, want lost 2.5 and used 15", r.Budget)
	}
}

func TestInfraAttemptsRunOut(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(nil, temporal.NewHeartbeatTimeoutError())
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", Policy: testPolicy})
	r := result(t, env)
	if r.Outcome != runs.OutcomeInfraFailed || r.Score != nil || r.Attempts != 3 {
		t.Fatalf("result = %+v", r)
	}
}

func TestAgentFailureIsNotEvaluated(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(agentDone(env, &activities.AgentResult{
		StoppedBy: activities.StopExited, ExitCode: 3, Reason: "exit code 3", AgentSeconds: 2,
	}, ck(1, 2)))
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", Policy: testPolicy})
	r := result(t, env)
	if r.Outcome != runs.OutcomeAgentFailed || r.Score != nil || r.Reason != "agent exit code 3" {
		t.Fatalf("result = %+v", r)
	}
	env.AssertNotCalled(t, activities.EvaluateName, mock.Anything, mock.Anything)
}

// TestHandedBackAttempt: an attempt whose agent was stopped and
// checkpointed (its worker stopping) delivers the checkpoint before it
// ends; the next attempt resumes from it at once and nothing is booked as
// lost.
func TestHandedBackAttempt(t *testing.T) {
	env := newEnv(t)
	calls := 0
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.AgentInput) (*activities.AgentResult, error) {
			calls++
			if calls == 1 {
				_, _ = committed(env, in, nil, ck(3, 7))
				return nil, temporal.NewApplicationError("worker stopping", activities.ErrAgentKilled, activities.Heartbeat{AgentSeconds: 7})
			}
			if in.Resume == nil || in.Resume.Seq != 3 || in.Budget.UsedS != 7 || in.NextSeq != 4 {
				return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("attempt 2 must resume checkpoint 3 at 7 s: %+v", in), activities.ErrBadTask, nil)
			}
			return committed(env, in, &activities.AgentResult{StoppedBy: activities.StopExited, AgentSeconds: 12}, ck(4, 12))
		})
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(score(0.6), nil)
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", Policy: testPolicy})
	r := result(t, env)
	if r.Outcome != runs.OutcomeScored || r.Attempts != 2 || r.Budget.LostS != 0 || r.Budget.UsedS != 12 {
		t.Fatalf("result = %+v", r)
	}
}

// TestForkStartsFromAnotherRunsCheckpoint: the first attempt restores the
// source run's checkpoint and inherits the agent time it covers.
func TestForkStartsFromAnotherRunsCheckpoint(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(activities.LoadCheckpointName, mock.Anything, mock.Anything).Return(
		&activities.CheckpointRef{RunID: "run-src", Seq: 3, AgentSeconds: 10}, nil)
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.AgentInput) (*activities.AgentResult, error) {
			if in.Resume == nil || in.Resume.RunID != "run-src" || in.Resume.Seq != 3 || in.Budget.UsedS != 10 {
				return nil, temporal.NewNonRetryableApplicationError("fork input wrong", activities.ErrBadTask, nil)
			}
			return committed(env, in, &activities.AgentResult{StoppedBy: activities.StopExited, AgentSeconds: 14}, ck(4, 14))
		})
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.EvalInput) (*activities.EvalResult, error) {
			if in.Final.RunID != "" || in.Final.Seq != 4 {
				return nil, temporal.NewNonRetryableApplicationError("the fork must evaluate its own final checkpoint", activities.ErrBadTask, nil)
			}
			return score(0.6), nil
		})
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", ForkFrom: &ForkSource{RunID: "run-src", Seq: 3}, Policy: testPolicy})
	r := result(t, env)
	if r.Outcome != runs.OutcomeScored || r.Budget.UsedS != 14 || r.Checkpoints != 1 {
		t.Fatalf("result = %+v", r)
	}
}

// TestZombieSignalsIgnored: attempt 1 is lost after checkpoint 1; while
// attempt 2 runs, attempt 1's worker (cut off, its agent still running)
// reports checkpoint 2 and a failed checkpoint. Neither moves the run:
// the checkpoints, the ledger and the stale alert are attempt 2's alone.
func TestZombieSignalsIgnored(t *testing.T) {
	env := newEnv(t)
	from := func(c activities.CheckpointRef, attempt int) activities.CheckpointRef {
		c.Attempt, c.From = attempt, attempt
		return c
	}
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.AgentInput) (*activities.AgentResult, error) {
			if in.Attempt == 1 {
				return committedThen(env, in, temporal.NewHeartbeatTimeoutError(activities.Heartbeat{AgentSeconds: 6}), from(ck(1, 4), 1))
			}
			for i := 0; i < 3; i++ {
				if err := env.SignalWorkflowByID(in.RunID, activities.SignalCheckpointFailed, activities.CheckpointFailure{Consecutive: i + 1, Error: "zombie", From: 1}); err != nil {
					return nil, err
				}
			}
			return committed(env, in, &activities.AgentResult{StoppedBy: activities.StopExited, AgentSeconds: 9},
				from(ck(2, 29), 1), from(ck(3, 29.5), 1), from(ck(2, 7), 2), from(ck(3, 9), 2))
		})
	var status Status
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.EvalInput) (*activities.EvalResult, error) {
			v, err := env.QueryWorkflow(QueryStatus)
			if err == nil {
				err = v.Get(&status)
			}
			return score(0.5), err
		})
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", Policy: testPolicy})
	r := result(t, env)
	if r.Outcome != runs.OutcomeScored || r.Attempts != 2 || r.Checkpoints != 3 || r.Budget.UsedS != 9 || r.Budget.LostS != 2 {
		t.Fatalf("result = %+v, budget %+v", r, r.Budget)
	}
	if status.CheckpointFailures != 0 || status.CheckpointStale || status.LastCheckpointAgentS != 9 {
		t.Fatalf("status = %+v", status)
	}
}

// committedThen delivers refs, then fails the attempt with err.
func committedThen(env *testsuite.TestWorkflowEnvironment, in activities.AgentInput, err error, refs ...activities.CheckpointRef) (*activities.AgentResult, error) {
	if _, serr := committed(env, in, nil, refs...); serr != nil {
		return nil, serr
	}
	return nil, err
}

// TestSilentHostLeaseNotReleased: an attempt lost because its host went
// silent is not followed by a release on that host's queue (it would wait
// for nobody); an attempt that ended with its host answering is.
func TestSilentHostLeaseNotReleased(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.AgentInput) (*activities.AgentResult, error) {
			switch in.Attempt {
			case 1:
				return nil, temporal.NewHeartbeatTimeoutError()
			case 2:
				return nil, temporal.NewApplicationError("killed", activities.ErrAgentKilled, activities.Heartbeat{AgentSeconds: 1})
			}
			return committed(env, in, &activities.AgentResult{StoppedBy: activities.StopExited, AgentSeconds: 3}, ck(1, 3))
		})
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(score(0.5), nil)
	var released []int
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		var l activities.Lease
		if info.ActivityType.Name == activities.ReleaseLeaseName && args.Get(&l) == nil {
			released = append(released, len(released))
		}
	})
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", Policy: testPolicy})
	r := result(t, env)
	// Releases: attempt 2's and attempt 3's (which its evaluation ran
	// on); none for 1.
	if r.Attempts != 3 || len(released) != 2 {
		t.Fatalf("attempts %d, releases %d", r.Attempts, len(released))
	}
}

// TestSlurmProvisionedAttempt: under provision.kind slurm each attempt
// gets a host before its lease, leases on that host's queue, and gives
// the host back when it ends; so does the evaluation.
func TestSlurmProvisionedAttempt(t *testing.T) {
	env := newEnv(t)
	asked, released := fakeSlurm(env)
	var leasedOn []string
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == activities.AcquireLeaseName {
			leasedOn = append(leasedOn, info.TaskQueue)
		}
	})
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(
		agentDone(env, &activities.AgentResult{StoppedBy: activities.StopExited, AgentSeconds: 3}, ck(1, 3)))
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(score(0.5), nil)
	pol := testPolicy
	pol.Provision, pol.ProvisionMargin = activities.ProvisionKindSlurm, time.Minute
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", Policy: pol})
	r := result(t, env)
	if r.Outcome != runs.OutcomeScored || len(*asked) != 2 || (*asked)[0].Role != "" || (*asked)[1].Role != runs.RoleEvaluation ||
		(*asked)[0].TimeLimit != 30*time.Second+time.Minute {
		t.Fatalf("outcome %s, hosts asked %+v", r.Outcome, *asked)
	}
	if !slices.Equal(*released, []string{"job-1", "job-2"}) || !slices.Equal(leasedOn, []string{"q-job-1", "q-job-2"}) {
		t.Fatalf("released %v, leased on %v", *released, leasedOn)
	}
}

// TestProvisionedHostThatNeverServesIsReplaced is audit #8: a job or an
// instance whose worker never polls was waited on for the whole lease
// timeout (24 h), and then the run ended. Its lease now waits BootTimeout
// at most; the host is given back and another provisioned, as an infra
// loss, and the run goes on.
func TestProvisionedHostThatNeverServesIsReplaced(t *testing.T) {
	env := newEnvLeasing(t, 0, func(ctx context.Context, r activities.LeaseRequest) (*activities.Lease, error) {
		if q := activity.GetInfo(ctx).TaskQueue; q == "q-job-1" {
			return nil, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)
		}
		return &activities.Lease{HostID: "h", HostQueue: activity.GetInfo(ctx).TaskQueue, Token: r.RunID + "#" + r.Role}, nil
	})
	asked, released := fakeSlurm(env)
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(
		agentDone(env, &activities.AgentResult{StoppedBy: activities.StopExited, AgentSeconds: 3}, ck(1, 3)))
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(score(0.5), nil)
	pol := testPolicy
	pol.Provision, pol.BootTimeout = activities.ProvisionKindSlurm, 10*time.Minute
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", Policy: pol})
	r := result(t, env)
	if r.Outcome != runs.OutcomeScored || r.Attempts != 2 || len(*asked) != 3 {
		t.Fatalf("outcome %s after %d attempts, %d hosts asked (want scored on the second, plus the evaluation's)", r.Outcome, r.Attempts, len(*asked))
	}
	if !slices.Equal(*released, []string{"job-1", "job-2", "job-3"}) {
		t.Fatalf("released %v", *released)
	}
}

// TestABadTaskIsNotRetried: an agent activity that fails for a reason no
// other attempt would change (a secret the worker refuses) ends the run
// at once, naming it, instead of trying every infra attempt.
func TestABadTaskIsNotRetried(t *testing.T) {
	env := newEnv(t)
	tries := 0
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.AgentInput) (*activities.AgentResult, error) {
			tries++
			return nil, temporal.NewNonRetryableApplicationError("secret AWS_KEY is refused", activities.ErrBadTask, nil)
		})
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", Policy: testPolicy})
	r := result(t, env)
	if tries != 1 || r.Outcome != runs.OutcomeInfraFailed || !strings.Contains(r.Reason, "secret AWS_KEY is refused") {
		t.Fatalf("%d tries, outcome %s (%s)", tries, r.Outcome, r.Reason)
	}
}

// fakeSlurm answers ProvisionHost with job-1, job-2, … on queues q-job-N
// and records the requests and the hosts given back.
func fakeSlurm(env *testsuite.TestWorkflowEnvironment) (asked *[]activities.HostRequest, released *[]string) {
	asked, released = &[]activities.HostRequest{}, &[]string{}
	env.OnActivity(activities.ProvisionHostName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req activities.HostRequest) (*activities.ProvisionedHost, error) {
			*asked = append(*asked, req)
			id := fmt.Sprintf("job-%d", len(*asked))
			return &activities.ProvisionedHost{Kind: activities.ProvisionKindSlurm, ID: id, HostID: id, HostQueue: "q-" + id}, nil
		})
	env.OnActivity(activities.ReleaseHostName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, h activities.ProvisionedHost) error {
			*released = append(*released, h.ID)
			return nil
		})
	return asked, released
}

// TestTakeoverCorrectsTheLedger is the cluster finding F5: attempt 1's
// heartbeats stop reaching the server at 20 s (history down), so it is
// booked lost from its last heard checkpoint (18 s) to an estimate; it
// had in fact committed up to 81 s, which attempt 2 takes over. The
// ledger then says attempt 1 reached 81 s with nothing lost past the
// estimate, attempt 2 started from 81 s, and infra wait no longer counts
// the agent's kept work.
func TestTakeoverCorrectsTheLedger(t *testing.T) {
	env := newEnv(t)
	var booked float64
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.AgentInput) (*activities.AgentResult, error) {
			if in.Attempt == 1 {
				c := ck(1, 18)
				c.Attempt, c.From = 1, 1
				return committedThen(env, in, temporal.NewHeartbeatTimeoutError(activities.Heartbeat{AgentSeconds: 20}), c)
			}
			v, err := env.QueryWorkflow(QueryStatus)
			var st Status
			if err == nil {
				err = v.Get(&st)
			}
			if err != nil {
				return nil, err
			}
			booked = st.Budget.LostS
			taken := ck(2, 81)
			taken.Attempt, taken.From = 1, 2
			mine := ck(3, 132)
			mine.Attempt, mine.From = 2, 2
			return committed(env, in, &activities.AgentResult{StoppedBy: activities.StopExited, AgentSeconds: 132}, taken, mine)
		})
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(score(0.5), nil)
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", Policy: testPolicy})
	r := result(t, env)
	if r.Outcome != runs.OutcomeScored || r.Attempts != 2 || r.Budget.UsedS != 132 || len(r.AttemptLog) != 2 {
		t.Fatalf("result = %+v", r)
	}
	first, second := r.AttemptLog[0], r.AttemptLog[1]
	if booked <= 0 || first.ToS != 81 || first.LostS != 0 || r.Budget.LostS != 0 || second.FromS != 81 {
		t.Fatalf("booked %.2f lost before the takeover; after it: attempts %+v, budget %+v; want attempt 1 to 81 s with nothing lost, attempt 2 from 81 s", booked, r.AttemptLog, r.Budget)
	}
	t.Logf("lost %.2f s before the takeover, %.2f after; infra wait %.2f s", booked, r.Budget.LostS, r.Budget.InfraWaitS)
}

// TestSlotTakenAtOnce: a run asks the worker running it for a slot first
// (a local activity that does not wait): with one free there, its agent
// is scheduled from the same workflow task, no lease is queued and the
// run is never seen leasing; with none, the lease waits through the
// queue as before, the run leasing meanwhile.
func TestSlotTakenAtOnce(t *testing.T) {
	for _, c := range []struct {
		name       string
		full       bool
		wantQueued int
	}{{"a slot free here", false, 0}, {"this host full", true, 1}} {
		t.Run(c.name, func(t *testing.T) {
			var local, queued []activities.LeaseRequest
			env := newEnvLeasing(t, 0, func(ctx context.Context, r activities.LeaseRequest) (*activities.Lease, error) {
				if activity.GetInfo(ctx).IsLocalActivity {
					local = append(local, r)
				} else {
					queued = append(queued, r)
				}
				if c.full && r.AtOnce {
					return nil, temporal.NewApplicationError("host h: all 1 agent slots are leased", activities.ErrNoCapacity)
				}
				return &activities.Lease{HostID: "h", HostQueue: "mlrb-host-h", Token: r.RunID + "#"}, nil
			})
			var phases []string
			env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
				if p, ok := args.Get(0).(temporal.SearchAttributes).GetKeyword(SAPhase); ok {
					phases = append(phases, p)
				}
			}).Return(nil)
			env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(
				agentDone(env, &activities.AgentResult{StoppedBy: activities.StopExited, AgentSeconds: 3}, ck(1, 3)))
			env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(score(0.5), nil)
			env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "noop", Policy: testPolicy})
			if r := result(t, env); r.Outcome != runs.OutcomeScored {
				t.Fatalf("outcome %s: %s", r.Outcome, r.Reason)
			}
			if len(local) != 1 || !local[0].AtOnce || len(queued) != c.wantQueued || slices.ContainsFunc(queued, func(r activities.LeaseRequest) bool { return r.AtOnce }) {
				t.Fatalf("leases asked here %+v, through the queue %+v", local, queued)
			}
			if leasing := slices.Contains(phases, string(runs.PhaseLeasing)); leasing != c.full {
				t.Fatalf("phases %v: leasing %v, want %v", phases, leasing, c.full)
			}
		})
	}
}
