// Command hostile runs many hostile attempts at once on one worker, each
// an attack of the sandbox audits (testtask adversary MODE, in real
// containers), with one well-behaved run beside them, and prints the
// worker's peak resident memory, each attack's outcomes, and the
// well-behaved run's score and agent time beside what it gets alone.
//
//	go run ./bench/hostile -n 64
//	go run ./bench/hostile -n 4 -modes bigrefused
//
// It builds its binaries and images itself (nothing is pulled) and runs
// an embedded Temporal server (worker --dev) in a scratch directory.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/procfs"
	"golang.org/x/sync/errgroup"

	"github.com/mlrb/mlrb/internal/kit/ports"
	"github.com/mlrb/mlrb/internal/sandbox/runtime"
)

// modes are the attacks, as testtask's adversary names them.
var modes = []string{"cmdline", "deep", "longpath", "refused", "bigrefused", "volume", "empties"}

const (
	adversaryImage = "mlrb-adversary:bench"
	volumeImage    = "mlrb-adversary-volume:bench"
	refImage       = "mlrb-reference:bench"
)

func main() {
	n := flag.Int("n", 64, "hostile attempts at once")
	limit := flag.Duration("time-limit", 150*time.Second, "each run's time limit")
	only := flag.String("modes", strings.Join(modes, ","), "the attacks, taken in turn (e.g. bigrefused: 32 MiB refusals beside a 429 storm)")
	flag.Parse()
	known := modes
	modes = strings.Split(*only, ",")
	for _, m := range modes {
		if !slices.Contains(known, m) {
			fmt.Fprintf(os.Stderr, "hostile: -modes: %q is not one of %s\n", m, strings.Join(known, ", "))
			os.Exit(2)
		}
	}
	if err := run(*n, *limit); err != nil {
		fmt.Fprintln(os.Stderr, "hostile:", err)
		os.Exit(1)
	}
}

// bench is the scratch world: binaries, a state dir, the worker's env.
type bench struct {
	dir, bin string
	env      []string
	limit    time.Duration
}

func run(n int, limit time.Duration) error {
	dir, err := os.MkdirTemp("", "mlrb-hostile-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	b := &bench{dir: dir, bin: filepath.Join(dir, "bin"), limit: limit}
	t0 := time.Now()
	if err := b.build(); err != nil {
		return err
	}
	fmt.Printf("built binaries and images in %.0f s\n", time.Since(t0).Seconds())
	port, err := ports.Reserve("127.0.0.1")
	if err != nil {
		return err
	}
	defer port.Release()
	if err := b.configure(port.Number, n); err != nil {
		return err
	}
	worker := exec.Command(filepath.Join(b.bin, "worker"), "--dev")
	worker.Env = b.env
	logf, err := os.Create(filepath.Join(dir, "worker.log"))
	if err != nil {
		return err
	}
	defer func() { _ = logf.Close() }()
	worker.Stdout, worker.Stderr = logf, logf
	if err := worker.Start(); err != nil {
		return err
	}
	defer func() { _ = worker.Process.Kill(); _ = worker.Wait() }()
	if err := waitPort(port.Number, 2*time.Minute); err != nil {
		return err
	}

	alone, err := b.result(b.start("well-behaved", "1"))
	if err != nil {
		return fmt.Errorf("the well-behaved run alone: %w", err)
	}
	fmt.Printf("alone: the well-behaved run %s, score %s, agent time %.1f s\n", alone.Outcome, score(alone), alone.Budget.UsedS)

	t1 := time.Now()
	ids := make([]string, n)
	for i := range n {
		ids[i] = b.start("adv-"+modes[i%len(modes)], strconv.Itoa(i+1))
	}
	beside := b.start("well-behaved", "1")
	results := make([]result, n+1)
	var g errgroup.Group
	g.SetLimit(16)
	for i, id := range append(ids, beside) {
		g.Go(func() error {
			r, err := b.result(id)
			results[i] = r
			return err
		})
	}
	werr := g.Wait()
	wall := time.Since(t1)
	p := peakRSS(worker.Process.Pid)
	if werr != nil {
		return werr
	}
	fmt.Printf("%d hostile attempts and one well-behaved run at once: %.0f s; the worker's peak RSS %d MiB (VmHWM, over its life)\n", n, wall.Seconds(), p>>20)
	byMode := map[string]map[string]int{}
	for i, r := range results[:n] {
		m := modes[i%len(modes)]
		if byMode[m] == nil {
			byMode[m] = map[string]int{}
		}
		byMode[m][r.Outcome]++
	}
	for _, m := range modes {
		fmt.Printf("  %-9s %v\n", m, byMode[m])
	}
	w := results[n]
	same := w.Outcome == alone.Outcome && score(w) == score(alone)
	fmt.Printf("beside them: the well-behaved run %s, score %s, agent time %.1f s (alone: %s, %s, %.1f s); same outcome and score: %v\n",
		w.Outcome, score(w), w.Budget.UsedS, alone.Outcome, score(alone), alone.Budget.UsedS, same)
	for _, r := range results {
		if r.Outcome == "infra_failed" || r.Outcome == "evaluation_failed" {
			return fmt.Errorf("run %s ended %s (%s): not the agent's own outcome", r.RunID, r.Outcome, r.Reason)
		}
	}
	return nil
}

// build compiles the worker, the starter, the hostile subject and the
// reference agent, and builds the images from them.
func (b *bench) build() error {
	for name, pkg := range map[string]string{"worker": "./worker", "starter": "./starter", "testtask": "./internal/sandbox/runtime/testdata/testtask", "mlrb": "./cmd/mlrb-agent"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(b.bin, name), pkg)
		if name == "testtask" || name == "mlrb" {
			// Static, for FROM scratch images; the worker and the starter
			// build as the tests build them (one build cache).
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: %v: %s", pkg, err, out)
		}
	}
	ctx := context.Background()
	d, err := runtime.NewDocker(ctx, "bench-build")
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	keep := filepath.Join(b.dir, "keep")
	if err := os.WriteFile(keep, nil, 0o644); err != nil {
		return err
	}
	df, err := os.ReadFile(filepath.Join("deploy", "reference.Dockerfile"))
	if err != nil {
		return fmt.Errorf("run from the repository's root: %w", err)
	}
	for _, im := range []struct {
		tag   string
		files map[string]string
		df    string
	}{
		{adversaryImage, map[string]string{"testtask": filepath.Join(b.bin, "testtask"), "keep": keep}, "FROM scratch\nCOPY testtask /testtask\nCOPY --chown=65532:65532 keep /tmp/keep\n"},
		{volumeImage, nil, "FROM " + adversaryImage + "\nVOLUME /scratch\n"},
		{refImage, map[string]string{"mlrb": filepath.Join(b.bin, "mlrb")}, string(df)},
	} {
		if err := runtime.BuildImage(ctx, d, im.tag, im.files, im.df); err != nil {
			return err
		}
	}
	return nil
}

// configure writes the task, the agent definitions and the env file, and
// sets the worker's environment.
func (b *bench) configure(port, n int) error {
	tasksDir, agentsDir := filepath.Join(b.dir, "tasks"), filepath.Join(b.dir, "agents")
	for _, d := range []string{tasksDir, agentsDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	raw, err := os.ReadFile(filepath.Join("tasks", "catalog", "mini_baby_lm.yaml"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tasksDir, "bench_hostile.yaml"), []byte(strings.Replace(string(raw), "id: mini_baby_lm", "id: bench_hostile", 1)), 0o644); err != nil {
		return err
	}
	defs := map[string]string{"well-behaved": "image: " + refImage + "\nprovider: openai\n"}
	for _, m := range modes {
		image := adversaryImage
		if m == "volume" {
			image = volumeImage
		}
		defs["adv-"+m] = "image: " + image + "\nprovider: openai\nargs: [/testtask, adversary, " + m + "]\n"
	}
	for name, body := range defs {
		if err := os.WriteFile(filepath.Join(agentsDir, name+".yaml"), []byte("name: "+name+"\n"+body), 0o644); err != nil {
			return err
		}
	}
	envFile := filepath.Join(b.dir, "agent.env")
	if err := os.WriteFile(envFile, []byte("OPENAI_API_KEY=sk-bench-unused\n"), 0o600); err != nil {
		return err
	}
	b.env = append(os.Environ(),
		"MLRB_DEV_STATE_DIR="+filepath.Join(b.dir, "state"), "MLRB_DEV_PORT="+strconv.Itoa(port), "MLRB_DEV_UI_PORT=0",
		"MLRB_TEMPORAL_ADDRESS=127.0.0.1:"+strconv.Itoa(port), "MLRB_TASKS_DIR="+tasksDir, "MLRB_AGENTS_DIR="+agentsDir,
		"MLRB_HOST_ID=bench-hostile", "MLRB_HOST_RUNTIME=docker", "MLRB_CONTAINER_AGENT_IMAGE="+refImage, "MLRB_CONTAINER_EVAL_IMAGE="+refImage,
		"MLRB_CONTAINER_MEMORY_MB=512", "MLRB_AGENT_ENV_FILE="+envFile, "MLRB_EVAL_CURVE=off",
		"MLRB_HOST_MAX_AGENTS="+strconv.Itoa(n+1), "MLRB_AGENT_WORKSPACE_MAX_ENTRIES=5000", "MLRB_GATEWAY_MAX_REFUSED=500", "MLRB_GATEWAY_MAX_REFUSED_MB=1024")
	return nil
}

// start starts a run of agent and returns its id ("" when it did not
// start: its result says why).
func (b *bench) start(agent, seed string) string {
	out, err := b.starter("run", "--task", "bench_hostile", "--agent", agent, "--seed", seed, "--time-limit", b.limit.String(), "--json")
	if err != nil {
		fmt.Fprintln(os.Stderr, "hostile: start", agent, err)
		return ""
	}
	var s struct {
		RunID string `json:"run_id"`
	}
	_ = json.Unmarshal([]byte(out), &s)
	return s.RunID
}

type result struct {
	RunID   string   `json:"run_id"`
	Outcome string   `json:"outcome"`
	Reason  string   `json:"reason"`
	Score   *float64 `json:"score"`
	Budget  struct {
		UsedS float64 `json:"used_s"`
	} `json:"budget"`
}

func (b *bench) result(id string) (result, error) {
	var r result
	if id == "" {
		return r, errors.New("a run did not start")
	}
	out, err := b.starter("result", id, "--wait", "--json")
	if err != nil {
		return r, fmt.Errorf("result %s: %w", id, err)
	}
	return r, json.Unmarshal([]byte(out), &r)
}

func (b *bench) starter(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(b.bin, "starter"), args...)
	cmd.Env = b.env
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%v: %s", err, strings.TrimSpace(errb.String()))
	}
	return string(out), nil
}

func score(r result) string {
	if r.Score == nil {
		return "none"
	}
	return strconv.FormatFloat(*r.Score, 'f', 6, 64)
}

func waitPort(port int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
			_ = c.Close()
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("the server did not listen on %d within %s", port, within)
}

// peakRSS is a live process's peak resident memory since it started
// (VmHWM, the kernel's high-water mark; 0 when it cannot be read).
func peakRSS(pid int) int64 {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0
	}
	st, err := p.NewStatus()
	if err != nil {
		return 0
	}
	return int64(st.VmHWM)
}
