// Command load holds a thousand runs in flight on one embedded Temporal
// server and one worker, each its own process (this binary run again in
// another role), so that the CPU and peak memory of each can be read.
//
// It first times -seq runs one after another on the idle pair (the
// orchestration overhead of one run: the no-op agent submits at once),
// each after a run of the same workflow shape with nothing of mlrb's in
// it (Temporal alone, the floor under that overhead). Then it starts
// -runs runs before the worker polls, so that all of them are in flight
// at once, lets them finish and checks each was scored. Then it
// times a mini benchmark of no-op agents, 7 tasks × -seeds seeds, -conc
// at once. It prints wall times, per-run figures (p50, p99), the runs
// lost, and each process's CPU seconds and peak resident memory. Each
// step is skipped when its flag is 0 (-runs 0: the overhead alone).
package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/mlrb/mlrb/agents"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/kit/ports"
	"github.com/mlrb/mlrb/internal/process/agentcmd"
	"github.com/mlrb/mlrb/internal/process/app"
	"github.com/mlrb/mlrb/internal/results/runresults"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/tasks"
	"github.com/mlrb/mlrb/workflows"
)

// roleEnv tells a child process which part it plays; profileEnv, if set,
// where it writes its CPU profile (<role>.pprof).
const (
	roleEnv    = "MLRB_LOAD_ROLE"
	profileEnv = "MLRB_LOAD_CPUPROFILE"
)

func main() {
	if agentcmd.RunIfAgent() {
		return
	}
	if role := os.Getenv(roleEnv); role != "" {
		if err := serve(role); err != nil {
			fmt.Fprintln(os.Stderr, "load:", role+":", err)
			os.Exit(1)
		}
		return
	}
	o := opts{}
	flag.IntVar(&o.runs, "runs", 1000, "runs held in flight at once")
	flag.IntVar(&o.seq, "seq", 30, "runs timed one after another first, on the idle server and worker, each beside a run of Temporal alone")
	flag.StringVar(&o.task, "task", "mini_baby_lm", "mini task of the runs")
	flag.IntVar(&o.seeds, "seeds", 50, "then a mini benchmark of 7 tasks × this many seeds (0: skip)")
	flag.IntVar(&o.conc, "conc", 16, "runs at once in the benchmark")
	flag.IntVar(&o.starters, "starters", 32, "workflow starts in flight from the client")
	flag.StringVar(&o.profile, "cpuprofile", "", "a directory where the server and the worker each write a CPU profile (server.pprof, worker.pprof; `go tool pprof -top`)")
	flag.IntVar(&o.observed, "observed", 0, "then this many idle agents at once, observed and not, for the worker's CPU and memory (0: skip)")
	flag.BoolVar(&o.external, "external", false, "drive the Temporal cluster the environment's MLRB_TEMPORAL_* settings name (readied by `starter setup`) instead of an embedded server; its services' memory is theirs to read")
	flag.StringVar(&o.agentBin, "agent-binary", "build", "host.agent_binary of the worker: build (cmd/mlrb-agent, with the go tool), self (this binary, which embeds the server), or a path")
	flag.Parse()
	t0 := time.Now()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
	fmt.Printf("wall time in all: %s\n", time.Since(t0).Round(time.Millisecond))
}

type opts struct {
	runs, seq, seeds, conc, starters, observed int
	task, agentBin, profile                    string
	external                                   bool
	// prefix makes the workflow ids of this benchmark its own on a
	// cluster that keeps earlier ones.
	prefix string
}

// serve runs one child: the embedded server alone, or the worker alone.
func serve(role string) error {
	cfg, err := config.Load("", nil, nil, nil)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if dir := os.Getenv(profileEnv); dir != "" {
		f, err := os.Create(filepath.Join(dir, role+".pprof"))
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	st, err := app.StartStack(ctx, cfg, zap.NewNop(), role == "server", role == "server")
	if err != nil {
		return err
	}
	<-ctx.Done()
	st.Stop()
	return nil
}

func run(o opts) error {
	state, err := os.MkdirTemp("", "mlrb-load-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(state) }()
	port, err := ports.Reserve("127.0.0.1")
	if err != nil {
		return err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port.Number)
	agentBin, err := agentBinary(o.agentBin, state)
	if err != nil {
		return err
	}
	fmt.Println("agents and evaluators run from", agentBin)
	env := []string{"MLRB_HOST_AGENT_BINARY=" + agentBin, "MLRB_DEV_STATE_DIR=" + state, "MLRB_HOST_ID=load", "MLRB_HOST_MAX_AGENTS=" + strconv.Itoa(max(o.runs, 7*o.seeds, o.conc, o.observed))}
	if o.external {
		o.prefix = fmt.Sprintf("%d-", time.Now().Unix())
	} else {
		env = append(env, "MLRB_DEV_PORT="+strconv.Itoa(port.Number), "MLRB_DEV_UI_PORT=0", "MLRB_TEMPORAL_ADDRESS="+addr)
	}
	if o.profile != "" {
		env = append(env, profileEnv+"="+o.profile)
	}
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		if err := os.Setenv(k, v); err != nil {
			return err
		}
	}
	cfg, err := config.Load("", nil, nil, nil)
	if err != nil {
		return err
	}
	// Held until the end: the server child binds it, and no other mlrb
	// process may pick it meanwhile.
	defer port.Release()
	var srv *child
	if !o.external {
		if srv, err = start("server", nil, filepath.Join(state, "server.log")); err != nil {
			return err
		}
		defer srv.stop()
	}
	ctx := context.Background()
	c, err := dialWithin(ctx, cfg, time.Minute)
	if err != nil {
		return err
	}
	defer c.Close()
	wrk, err := start("worker", nil, filepath.Join(state, "worker.log"))
	if err != nil {
		return err
	}
	defer func() { wrk.stop() }()
	pol := app.Policy(cfg)
	in := func(seed int64) workflows.RunInput {
		return workflows.RunInput{Task: o.task, Agent: "noop", Seed: seed, Policy: pol}
	}

	if o.seq > 0 {
		if err := oneAtATime(ctx, c, cfg, o, in); err != nil {
			return err
		}
	}

	if o.observed > 0 {
		wrk.stop()
		if err := observedLoad(ctx, c, cfg, pol, o, state); err != nil {
			return err
		}
		if wrk, err = start("worker", nil, filepath.Join(state, "worker-after-observed.log")); err != nil {
			return err
		}
	}
	if o.runs > 0 {
		// Started while no worker polls, so that all are in flight
		// together before the first is dispatched.
		wrk.stop()
		cpuS0, _ := srv.usage()
		ids, err := startAll(ctx, c, cfg, o, in)
		if err != nil {
			return err
		}
		if wrk, err = start("worker", nil, filepath.Join(state, "worker-load.log")); err != nil {
			return err
		}
		if err := drain(ctx, c, ids, srv, wrk, cpuS0); err != nil {
			return err
		}
	}
	if o.seeds <= 0 {
		return nil
	}
	return benchmark(ctx, c, cfg, pol, o, srv, wrk)
}

// agentBinary is the binary the worker starts agents and evaluators with.
func agentBinary(flagVal, dir string) (string, error) {
	switch flagVal {
	case "self":
		return os.Executable()
	case "build":
		p := filepath.Join(dir, app.AgentBinaryName)
		cmd := exec.Command("go", "build", "-o", p, "./cmd/mlrb-agent")
		// Static, as task build makes it: no dynamic loader at each start.
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("-agent-binary build: go build ./cmd/mlrb-agent (run from the repository): %w", err)
		}
		return p, nil
	}
	return flagVal, nil
}

// startAll starts o.runs runs and waits until visibility counts them.
func startAll(ctx context.Context, c client.Client, cfg *config.Config, o opts, in func(int64) workflows.RunInput) ([]string, error) {
	ids := make([]string, o.runs)
	t0 := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(o.starters)
	for i := range ids {
		ids[i] = fmt.Sprintf("%sload-%d", o.prefix, i)
		g.Go(func() error {
			_, err := c.ExecuteWorkflow(gctx, client.StartWorkflowOptions{ID: ids[i], TaskQueue: cfg.Temporal.TaskQueue,
				TypedSearchAttributes: workflows.RunSearchAttributes(in(int64(1000 + i)))}, workflows.RunWorkflowName, in(int64(1000+i)))
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("start runs: %w", err)
	}
	started := time.Since(t0)
	// Visibility is written after the start: wait until it counts them all.
	var open int64
	for deadline := time.Now().Add(time.Minute); open < int64(o.runs) && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var err error
		if open, err = count(ctx, c, cfg.Temporal.Namespace, "WorkflowType = 'RunWorkflow' AND ExecutionStatus = 'Running'"); err != nil {
			return nil, err
		}
	}
	fmt.Printf("%d runs started in %s; %d in flight before the worker starts\n", o.runs, started.Round(time.Millisecond), open)
	return ids, nil
}

// drain waits for the runs and prints what they and the two processes
// took (the server's CPU counted from cpuS0).
func drain(ctx context.Context, c client.Client, ids []string, srv, wrk *child, cpuS0 float64) error {
	t0 := time.Now()
	spans, lost, err := await(ctx, c, ids)
	drained := time.Since(t0)
	// VmHWM is the peak since the process started: read once, at the end.
	cpuW, memW := wrk.usage()
	cpuS, memS := srv.usage()
	if err != nil {
		return err
	}
	fmt.Printf("%d runs in flight, drained by one worker in %s (%.1f runs/s): %d lost\n", len(ids), drained.Round(time.Millisecond),
		float64(len(ids))/drained.Seconds(), lost)
	if len(spans) > 0 {
		fmt.Printf("  per run, first workflow task to close: p50 %s  p99 %s  max %s\n", pct(spans, 0.5), pct(spans, 0.99), pct(spans, 1))
	}
	if srv == nil {
		fmt.Printf("  server: the cluster's; worker: %.1f CPU s, peak %.0f MiB resident\n", cpuW, memW)
	} else {
		fmt.Printf("  server: %.1f CPU s, peak %.0f MiB resident; worker: %.1f CPU s, peak %.0f MiB resident\n",
			cpuS-cpuS0, memS, cpuW, memW)
	}
	if lost > 0 {
		return fmt.Errorf("%d runs lost", lost)
	}
	return nil
}

// benchmark times a mini benchmark of no-op agents and prints the CPU
// each process spent on it.
func benchmark(ctx context.Context, c client.Client, cfg *config.Config, pol workflows.Policy, o opts, srv, wrk *child) error {
	cat, err := tasks.Load("")
	if err != nil {
		return err
	}
	ags, err := agents.Load("")
	if err != nil {
		return err
	}
	noop, err := ags.Get("noop")
	if err != nil {
		return err
	}
	in := workflows.NewBenchmarkInput(cat.IDs("mini"), []agents.Definition{noop}, o.seeds, o.conc, workflows.RunInput{LLMProvider: "none", Policy: pol})
	srv0, _ := srv.cpu()
	wrk0, agents0 := wrk.cpu()
	t0 := time.Now()
	r, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: o.prefix + "load-benchmark", TaskQueue: cfg.Temporal.TaskQueue}, workflows.BenchmarkWorkflowName, in)
	if err != nil {
		return err
	}
	var res workflows.BenchmarkResult
	if err := r.Get(ctx, &res); err != nil {
		return err
	}
	wall := time.Since(t0)
	srv1, _ := srv.cpu()
	wrk1, agents1 := wrk.cpu()
	e, err := app.OpenEngine(ctx, cfg)
	if err != nil {
		return err
	}
	stored, err := runresults.GetAll[runs.Result](ctx, e.Store, in.Matrix(o.prefix+"load-benchmark").Runs(), nil)
	if err != nil {
		return err
	}
	scored := 0
	for _, s := range stored {
		if s != nil && s.Outcome == runs.OutcomeScored {
			scored++
		}
	}
	fmt.Printf("mini benchmark, no-op agents, %d tasks × %d seeds, %d at once: %d of %d runs scored, wall time %s\n",
		len(in.Tasks), o.seeds, o.conc, scored, len(stored), wall.Round(time.Millisecond))
	n := float64(len(stored))
	fmt.Printf("  CPU: server %.1f s, worker %.1f s, agents and evaluators %.1f s; a run: %.0f, %.0f, %.0f ms\n",
		srv1-srv0, wrk1-wrk0, agents1-agents0, (srv1-srv0)/n*1000, (wrk1-wrk0)/n*1000, (agents1-agents0)/n*1000)
	if scored != len(in.Tasks)*o.seeds {
		return fmt.Errorf("benchmark: %d of %d runs scored", scored, len(in.Tasks)*o.seeds)
	}
	return nil
}
