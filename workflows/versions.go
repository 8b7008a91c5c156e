// Changes to workflow code that live runs replay are gated, so that a run started before a deployment replays the way it ran (a 24 h run, plus up to.

package workflows

import "go.temporal.io/sdk/workflow"

// Changes to workflow code that live runs replay are gated, so that a
// run started before a deployment replays the way it ran (a 24 h run,
// plus up to eval.wait_limit waiting for an evaluation retry, spans
// deployments): a change that adds, removes or reorders commands
// (activities, timers, child workflows, search attribute upserts) takes
// workflow.GetVersion with a change id listed here, keeps the old path
// for DefaultVersion, and the recorded histories in testdata replay in
// CI. A change id is never reused. A new change id is read through
// runEnv.version, which answers for a lean run without a marker.
const (
	// versionEvalOnLease: evaluation leases a GPU slot on a host and runs
	// on that host's queue (before: the shared queue, no lease).
	versionEvalOnLease = "evaluate-on-a-leased-slot"
	// versionLeaseExpires: an attempt whose host went silent (heartbeat
	// or schedule-to-start timeout) no longer waits for its lease to be
	// released on that host (the host's lease expires by itself), nor
	// does one that released its lease itself (a host stopping); before,
	// a release on a gone host's queue held the run up to a minute.
	versionLeaseExpires = "silent-host-lease-expires"
	// versionBoundedBenchmark: a benchmark keeps counts, not results (each
	// run stores its own in the blob store), abandons its runs to its next
	// execution and continues as new every ContinueAfter runs.
	versionBoundedBenchmark = "bounded-benchmark"
	// versionResultStored: a run stores its result in the blob store
	// before it returns it.
	versionResultStored = "result-stored"
	// versionReprovision: a provisioned host that never serves its lease
	// (boot timeout, a dead job or instance) is given back and another
	// provisioned for the next attempt; before, the run ended.
	versionReprovision = "reprovision-a-host-that-never-served"
	// versionDisqualify: a model that breaks its task's rules ends the run
	// disqualified, unscored (its score kept as a metric); before, it was
	// scored with the violations beside.
	versionDisqualify = "disqualify-rule-breakers"
	// versionCurve: after the final evaluation, the checkpoints at the
	// curve's marks are scored on leased slots (score over time); before,
	// the run ended with its final score.
	versionCurve = "score-over-time"
	// versionAgentImages: a benchmark of agent definitions pins each image
	// agent's image to its digest when it starts (ResolveAgents); before,
	// benchmarks took built-in agents only.
	versionAgentImages = "benchmark-pins-agent-images"
	// versionParkAwaiting: a benchmark's run waiting for an evaluation or
	// curve retry signals its benchmark (SignalRunParked), which gives its
	// slot to the next run; before, it held the slot while it waited.
	versionParkAwaiting = "park-runs-awaiting-retry"
	// versionLeanRun: a run that takes this path takes every change above
	// (runEnv.version answers 1 for each without a marker of its own, so a new
	// run records one marker, not seven, each with a search attribute
	// upsert), holds one GPU slot from its agent's end (a static host's)
	// or its final evaluation through its curve, resolves its task, picks
	// its marks and stores its result as local activities, and upserts
	// its outcome with its last phase. Before, each change had its marker
	// and the run leased a slot per step. Version 2: the run picks its
	// marks before the final evaluation, which scores the final
	// checkpoint's dev-split mark too (one restore, one activity, not
	// two) and, when the curve needs no other, gives the slot back itself.
	// Version 3: a static host's slot is first asked of the worker
	// running the run, as a local activity that does not wait
	// (slots.acquire), and the phase is leasing only while a lease
	// waits: a run that finds a slot there starts its agent from the
	// workflow task that resolved its task.
	versionLeanRun = "lean-run"
)

// runEnv is what a run decided once, at its start, of which code paths
// it takes: read-only for every part, and the one place a version is
// asked (the predicates below name what each version changed).
type runEnv struct{ lean int }

// newRunEnv reads versionLeanRun once, as the run's first command.
func newRunEnv(ctx workflow.Context) runEnv {
	return runEnv{lean: int(workflow.GetVersion(ctx, versionLeanRun, workflow.DefaultVersion, 3))}
}

// isLean: the run takes versionLeanRun's path, and every change before
// it without a marker of its own.
func (e runEnv) isLean() bool { return e.lean >= 1 }

// foldsFinalMark: the final evaluation scores the final checkpoint's
// mark too and gives the slot back itself (version 2).
func (e runEnv) foldsFinalMark() bool { return e.lean >= 2 }

// leasesHereFirst: a static host's slot is first asked of the worker
// running the run (version 3).
func (e runEnv) leasesHereFirst() bool { return e.lean >= 3 }

// version is workflow.GetVersion of a change listed above: a lean run
// takes every change, without recording a marker for each.
func (e runEnv) version(ctx workflow.Context, changeID string) workflow.Version {
	if e.isLean() {
		return 1
	}
	return workflow.GetVersion(ctx, changeID, workflow.DefaultVersion, 1)
}
