// BenchmarkWorkflow: runs fanned out, the next picked, continued as new.

package workflows

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/workflow"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/agents"
	"github.com/mlrb/mlrb/internal/results/resume"
	"github.com/mlrb/mlrb/internal/results/runresults"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// planWindow is how many runs' resume-plan entries one ReadPlan fetches.
const planWindow = 200

// bench is one execution of BenchmarkWorkflow.
type bench struct {
	id      string
	in      BenchmarkInput
	jobs    []runresults.Child
	perKey  map[string]int // runs per task/agent
	st      BenchmarkState
	running map[string]runresults.Child
	// parked are runs under way that wait for an operator's retry: they
	// hold no slot.
	parked map[string]runresults.Child
	// started are the runs this execution started: their child futures
	// report their ends; the others are awaited by AwaitRuns.
	started map[string]workflow.ChildWorkflowFuture
	sel     workflow.Selector
	// plan holds the resume plan's entries of the window planFrom…
	plan     map[string]resume.Entry
	planFrom int
	awaiting bool
}

// BenchmarkWorkflow runs the children at most Concurrency at a time and
// continues as new every ContinueAfter started runs; its children
// outlive an execution (they are abandoned, not terminated, when it
// continues) and the next one waits for them. Results are stored per run
// in the blob store, so no payload grows with the benchmark.
func BenchmarkWorkflow(ctx workflow.Context, in BenchmarkInput) (*BenchmarkResult, error) {
	if workflow.GetVersion(ctx, versionBoundedBenchmark, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return benchmarkV0(ctx, in)
	}
	b, err := newBench(ctx, in)
	if err != nil {
		return nil, err
	}
	if err := b.pinImages(ctx); err != nil {
		return nil, err
	}
	if err := b.loop(ctx); err != nil {
		return nil, err
	}
	if b.st.Next < len(b.jobs) {
		next := b.in
		st := b.st
		st.Running, st.Parked = sortedIDs(b.running), sortedIDs(b.parked)
		next.State = &st
		return nil, workflow.NewContinueAsNewError(ctx, BenchmarkWorkflowName, next)
	}
	return b.aggregate(ctx), nil
}

func newBench(ctx workflow.Context, in BenchmarkInput) (*bench, error) {
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	b := &bench{id: id, in: in, jobs: in.ChildRuns(id), perKey: map[string]int{}, running: map[string]runresults.Child{}, parked: map[string]runresults.Child{},
		started: map[string]workflow.ChildWorkflowFuture{}, sel: workflow.NewSelector(ctx), planFrom: -1}
	for _, j := range b.jobs {
		b.perKey[j.Pair()]++
	}
	if in.State != nil {
		b.st = *in.State
	}
	if b.st.Ended == nil {
		b.st.Ended = map[string]map[runs.ChildState]int{}
	}
	b.st.Execution++
	byID := map[string]runresults.Child{}
	for _, j := range b.jobs {
		byID[j.ID] = j
	}
	for _, rid := range b.st.Running {
		b.running[rid] = byID[rid]
	}
	for _, rid := range b.st.Parked {
		b.parked[rid] = byID[rid]
	}
	b.st.Running, b.st.Parked = nil, nil
	b.sel.AddReceive(workflow.GetSignalChannel(ctx, SignalRunParked), func(c workflow.ReceiveChannel, _ bool) {
		var rid string
		c.Receive(ctx, &rid)
		if j, ok := b.running[rid]; ok {
			delete(b.running, rid)
			b.parked[rid] = j
		}
	})
	if err := workflow.SetQueryHandler(ctx, QueryProgress, func(page ProgressPage) (Progress, error) {
		return b.progress(page), nil
	}); err != nil {
		return nil, fmt.Errorf("progress query: %w", err)
	}
	if b.st.Execution == 1 {
		if err := workflow.UpsertTypedSearchAttributes(ctx, SABenchmark.ValueSet(id), SAAgent.ValueSet(strings.Join(in.Agents, ","))); err != nil {
			return nil, fmt.Errorf("search attributes: %w", err)
		}
	}
	return b, nil
}

// pinImages resolves the image agents' images to digests once, in the
// benchmark's first execution (later ones carry them); an extended
// benchmark resolves only its new agents', the others keep theirs.
func (b *bench) pinImages(ctx workflow.Context) error {
	if b.st.Execution != 1 || len(b.in.AgentDefs) == 0 {
		return nil
	}
	var defs []agents.Definition
	for _, name := range b.in.Agents {
		if d, ok := b.in.AgentDefs[name]; ok && d.Image != "" && b.in.Images[name] == "" {
			defs = append(defs, d)
		}
	}
	if len(defs) == 0 || workflow.GetVersion(ctx, versionAgentImages, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil
	}
	images, err := resolveAgents.call(ctx, callArgs{}, defs)
	if err != nil {
		return fmt.Errorf("resolve the agents' images: %w", err)
	}
	pinned := maps.Clone(b.in.Images)
	if pinned == nil {
		pinned = map[string]string{}
	}
	maps.Copy(pinned, images)
	b.in.Images = pinned
	return nil
}

// loop starts runs and counts their ends until every run has ended or
// this execution has started its share.
func (b *bench) loop(ctx workflow.Context) error {
	limit := b.in.Concurrency
	if limit <= 0 {
		limit = DefaultConcurrency
	}
	share := b.in.ContinueAfter
	if share <= 0 {
		share = DefaultContinueAfter
	}
	for b.done() < len(b.jobs) {
		for len(b.running) < limit && b.st.Next < len(b.jobs) && len(b.started) < share {
			if err := b.startNext(ctx); err != nil {
				return err
			}
		}
		if b.st.Next < len(b.jobs) && (len(b.started) >= share || workflow.GetInfo(ctx).GetContinueAsNewSuggested()) {
			b.handOver(ctx)
			return nil
		}
		b.awaitCarried(ctx)
		if len(b.running) == 0 && len(b.parked) == 0 {
			continue // kept runs only, counted already
		}
		b.sel.Select(ctx)
	}
	return nil
}

func (b *bench) done() int {
	n := 0
	for _, per := range b.st.Ended {
		for _, c := range per {
			n += c
		}
	}
	return n
}

// startNext starts the next run, or counts it when a resume keeps its result.
func (b *bench) startNext(ctx workflow.Context) error {
	i := b.st.Next
	j := b.jobs[i]
	entry, err := b.planEntry(ctx, i)
	if err != nil {
		return err
	}
	b.st.Next++
	if entry.Outcome != "" {
		b.count(j, runs.Outcome(entry.Outcome))
		return nil
	}
	if res, ok := b.in.Kept[j.ID]; ok {
		b.count(j, res.Outcome)
		return nil
	}
	ri := b.in.Run
	ri.Task, ri.Seed, ri.Agent, ri.Benchmark, ri.Continue = j.Task, j.Seed, j.Agent, b.id, b.in.Resumed
	if d, ok := b.in.AgentDefs[j.Agent]; ok {
		ri.AgentDef, ri.Image, ri.LLMBudget = &d, b.in.Images[j.Agent], d.Budget(ri.LLMBudget)
	}
	if c, ok := b.in.Carried[j.ID]; ok {
		ri.Carried = &c
	}
	if entry.Carried != nil {
		ri.Carried = entry.Carried
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID: j.ID,
		Memo:       map[string]any{"task": j.Task, "agent": j.Agent, "seed": j.Seed, "benchmark": b.id},
		// Its labels from its start: the run writes them no more.
		TypedSearchAttributes: RunSearchAttributes(ri),
		// The run outlives this execution when it continues as new; the
		// next execution waits for it (AwaitRuns).
		ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_ABANDON,
	})
	f := workflow.ExecuteChildWorkflow(cctx, RunWorkflowName, ri)
	b.running[j.ID] = j
	b.started[j.ID] = f
	b.sel.AddFuture(f, func(f workflow.Future) {
		var res runs.Result
		if err := f.Get(ctx, &res); err != nil {
			res.Outcome = runs.OutcomeInfraFailed
		}
		b.ended(j.ID, res.Outcome)
	})
	return nil
}

// planEntry is what a resume plan says of run i, fetched a window at a time.
func (b *bench) planEntry(ctx workflow.Context, i int) (resume.Entry, error) {
	if b.in.Plan == "" {
		return resume.Entry{}, nil
	}
	if b.planFrom < 0 || i < b.planFrom || i >= b.planFrom+planWindow {
		end := min(i+planWindow, len(b.jobs))
		ids := make([]string, 0, end-i)
		for _, j := range b.jobs[i:end] {
			ids = append(ids, j.ID)
		}
		plan, err := readPlan.call(ctx, callArgs{}, activities.ReadPlanInput{Key: b.in.Plan, RunIDs: ids})
		b.plan = plan
		if err != nil {
			return resume.Entry{}, fmt.Errorf("resume plan: %w", err)
		}
		b.planFrom = i
	}
	return b.plan[b.jobs[i].ID], nil
}

// ended counts the end of a running run once, whichever way it is
// reported (its child future, or AwaitRuns after a continue-as-new).
func (b *bench) ended(id string, o runs.Outcome) {
	j, ok := b.running[id]
	if !ok {
		if j, ok = b.parked[id]; !ok {
			return
		}
	}
	delete(b.running, id)
	delete(b.parked, id)
	b.count(j, o)
}

func (b *bench) count(j runresults.Child, o runs.Outcome) {
	k := j.Pair()
	if b.st.Ended[k] == nil {
		b.st.Ended[k] = map[runs.ChildState]int{}
	}
	b.st.Ended[k][runs.StateOf(o)]++
}

// awaitCarried waits, by one AwaitRuns at a time, for the runs an
// earlier execution started.
func (b *bench) awaitCarried(ctx workflow.Context) {
	if b.awaiting {
		return
	}
	var ids []string
	for _, id := range sortedIDs(b.running) {
		if _, ok := b.started[id]; !ok {
			ids = append(ids, id)
		}
	}
	for _, id := range sortedIDs(b.parked) {
		if _, ok := b.started[id]; !ok {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return
	}
	b.awaiting = true
	f := awaitRuns.start(ctx, callArgs{}, ids)
	b.sel.AddFuture(f, func(f workflow.Future) {
		b.awaiting = false
		var ends []runs.End
		if err := f.Get(ctx, &ends); err != nil {
			workflow.GetLogger(ctx).Warn("await runs", "error", err)
			return
		}
		for _, e := range ends {
			b.ended(e.RunID, e.Outcome)
		}
	})
}

// handOver ends this execution's part: it waits until each run it
// started has started (a run whose start failed has ended), so that the
// next execution waits only for runs that exist.
func (b *bench) handOver(ctx workflow.Context) {
	for _, id := range sortedIDs(b.running) {
		f, ok := b.started[id]
		if !ok {
			continue
		}
		if err := f.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("run did not start", "run", id, "error", err)
			b.ended(id, runs.OutcomeInfraFailed)
		}
	}
	workflow.GetLogger(ctx).Info("continuing as new", "execution", b.st.Execution, "next", b.st.Next, "running", len(b.running))
}

// progress answers the progress query: counts and one page of running runs.
func (b *bench) progress(page ProgressPage) Progress {
	if page.Limit <= 0 {
		page.Limit = DefaultProgressPage
	}
	page.Limit = min(page.Limit, MaxProgressPage)
	p := Progress{Total: len(b.jobs), Done: b.done(), PerTask: map[string]map[runs.ChildState]int{}, RunningTotal: len(b.running) + len(b.parked),
		Policy: b.in.Run.Policy.Leaderboard(), Execution: b.st.Execution}
	for k, n := range b.perKey {
		per := map[runs.ChildState]int{}
		for s, c := range b.st.Ended[k] {
			per[s] = c
			n -= c
		}
		p.PerTask[k] = per
		p.PerTask[k][runs.ChildQueued] = n
	}
	under := maps.Clone(b.running)
	maps.Copy(under, b.parked)
	for _, j := range under {
		p.PerTask[j.Pair()][runs.ChildRunning]++
		p.PerTask[j.Pair()][runs.ChildQueued]--
	}
	ids := sortedIDs(under)
	if page.Offset < len(ids) {
		p.Running = ids[max(page.Offset, 0):min(max(page.Offset, 0)+page.Limit, len(ids))]
	}
	return p
}

// aggregate stores the leaderboard, made from the runs' stored results.
func (b *bench) aggregate(ctx workflow.Context) *BenchmarkResult {
	out := &BenchmarkResult{BenchmarkID: b.id, Total: len(b.jobs), Ended: b.st.Ended}
	in := activities.AggregateResultsInput{Runs: b.in.Matrix(b.id), Policy: b.in.Run.Policy.Leaderboard()}
	agg, err := aggregateResults.call(ctx, callArgs{}, in)
	if err != nil {
		workflow.GetLogger(ctx).Warn("leaderboard not stored", "error", err)
		return out
	}
	out.Leaderboard, out.Setup, out.Missing = agg.Keys, agg.Setup, agg.Missing
	return out
}

func sortedIDs(m map[string]runresults.Child) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
