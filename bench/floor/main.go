// Command floor measures what Temporal alone costs a run of mlrb's shape
// on the embedded server, one run at a time: the floor under bench/load's
// per-run overhead. Its workflow does what a no-op run does in Temporal,
// and nothing of mlrb's: a first workflow task that records a version
// marker, runs two local activities and upserts a search attribute, then
// an activity on another queue (the host's, as RunAgent), a task that
// upserts and records a local activity, another activity there (as
// Evaluate), and a last task that upserts, records a local activity and
// completes. Every activity returns at once. The server, the worker and
// the client share this process (bench/load gives each its own).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/mlrb/mlrb/internal/devserver"
	"github.com/mlrb/mlrb/internal/ports"
)

const (
	workflowQueue = "floor"
	hostQueue     = "floor-host"
)

// phase stands for mlrb's MlrbPhase keyword.
var phase = temporal.NewSearchAttributeKeyKeyword("FloorPhase")

func main() {
	n := flag.Int("seq", 200, "runs timed one after another (after one that warms the caches)")
	bare := flag.Bool("bare", false, "the workflow tasks and activities alone: no marker, local activity or upsert")
	flag.Parse()
	if err := run(*n, *bare); err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}

func run(n int, bare bool) error {
	state, err := os.MkdirTemp("", "mlrb-floor-")
	if err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	defer func() { _ = os.RemoveAll(state) }()
	port, err := ports.Reserve("127.0.0.1")
	if err != nil {
		return fmt.Errorf("a port for the server: %w", err)
	}
	// Held (a lock, not a bind) until the end: no other mlrb process
	// picks it meanwhile.
	defer port.Release()
	ctx := context.Background()
	srv, err := devserver.Start(ctx, devserver.Options{StateDir: state, Port: port.Number, Namespace: "floor",
		SearchAttributes: map[string]enumspb.IndexedValueType{phase.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD}})
	if err != nil {
		return fmt.Errorf("embedded server: %w", err)
	}
	defer srv.Stop()
	// The SDK's logs go nowhere, as the worker's do in bench/load.
	quiet := log.NewStructuredLogger(slog.New(slog.DiscardHandler))
	c, err := client.Dial(client.Options{HostPort: srv.Address(), Namespace: "floor", Logger: quiet})
	if err != nil {
		return fmt.Errorf("dial %s: %w", srv.Address(), err)
	}
	defer c.Close()
	wfw := worker.New(c, workflowQueue, worker.Options{})
	wf, what := any(shape), "a run's shape"
	if bare {
		wf, what = bareShape, "its workflow tasks and activities alone"
	}
	wfw.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: "shape"})
	wfw.RegisterActivity(local)
	host := worker.New(c, hostQueue, worker.Options{})
	host.RegisterActivity(step)
	for _, w := range []worker.Worker{wfw, host} {
		if err := w.Start(); err != nil {
			return fmt.Errorf("start worker: %w", err)
		}
		defer w.Stop()
	}
	var took []time.Duration
	for i := 0; i <= n; i++ {
		t0 := time.Now()
		r, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("floor-%d", i), TaskQueue: workflowQueue}, "shape")
		if err != nil {
			return fmt.Errorf("start run %d: %w", i, err)
		}
		if err := r.Get(ctx, nil); err != nil {
			return fmt.Errorf("run %d: %w", i, err)
		}
		if i > 0 { // the first warms the caches
			took = append(took, time.Since(t0))
		}
	}
	slices.Sort(took)
	pct := func(p float64) time.Duration { return took[int(p*float64(len(took)-1))].Round(100 * time.Microsecond) }
	fmt.Printf("Temporal alone, %s, one at a time, %d runs: p50 %s  p99 %s  max %s\n", what, len(took), pct(0.5), pct(0.99), pct(1))
	return nil
}

// shape is a no-op run's workflow, as Temporal sees it, task by task.
func shape(ctx workflow.Context) error {
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 10 * time.Second})
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: hostQueue, StartToCloseTimeout: 10 * time.Second})
	// The first task: the run's version, its task resolved and a slot
	// taken (local activities), its phase, its agent (RunAgent).
	workflow.GetVersion(ctx, "floor", workflow.DefaultVersion, 1)
	for _, p := range []string{"resolving", "leasing"} {
		if err := workflow.ExecuteLocalActivity(lctx, local, p).Get(ctx, nil); err != nil {
			return err
		}
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, phase.ValueSet("running")); err != nil {
		return err
	}
	if err := workflow.ExecuteActivity(actx, step, "agent").Get(ctx, nil); err != nil {
		return err
	}
	// The second: its phase, its marks picked, its evaluation (Evaluate).
	if err := workflow.UpsertTypedSearchAttributes(ctx, phase.ValueSet("evaluating")); err != nil {
		return err
	}
	if err := workflow.ExecuteLocalActivity(lctx, local, "marks").Get(ctx, nil); err != nil {
		return err
	}
	if err := workflow.ExecuteActivity(actx, step, "evaluate").Get(ctx, nil); err != nil {
		return err
	}
	// The last: its outcome, its result stored, its close.
	if err := workflow.UpsertTypedSearchAttributes(ctx, phase.ValueSet("done")); err != nil {
		return err
	}
	return workflow.ExecuteLocalActivity(lctx, local, "result").Get(ctx, nil)
}

// bareShape is shape without its markers, local activities and upserts.
func bareShape(ctx workflow.Context) error {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: hostQueue, StartToCloseTimeout: 10 * time.Second})
	for _, p := range []string{"agent", "evaluate"} {
		if err := workflow.ExecuteActivity(actx, step, p).Get(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}

func local(context.Context, string) error { return nil }

func step(context.Context, string) error { return nil }
