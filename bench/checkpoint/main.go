// Command checkpoint measures checkpoints of a container workspace at
// real size against rclone, on the same tree and the same local S3 server
// (versitygw), side by side. A container workspace lives on the worker's
// disk (activities.ContainerWorkspace: root/app mounted as /app), so its
// checkpoint and restore are the engine's over that directory, as here.
// The tree is an MLRB workspace: 65 % of the bytes in four large weight
// files, the rest in -small files. It prints: a full checkpoint vs
// `rclone copy` up; an incremental checkpoint after 1 % of the bytes
// changed, and how much a writer in the workspace (the agent) is slowed
// meanwhile; a restore into a new workspace vs `rclone copy` down of the
// same store content and vs the disk's own write speed, measured first;
// the evaluation's start latency (restore what it reads of the final
// checkpoint, find the model, read its headers); and the peak resident
// memory of each phase.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/mlrb/mlrb/internal/scoring/model"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
	"github.com/mlrb/mlrb/internal/testkit/s3test"
	"github.com/mlrb/mlrb/tasks"
)

func main() {
	size := flag.Int("gib", 2, "tree size in GiB")
	small := flag.Int("small", 10000, "small files holding 35 % of the bytes")
	dir := flag.String("dir", "", "scratch dir (default: a temp dir)")
	parallel := flag.Int("parallel", 8, "chunks moved at once (storage.parallel)")
	flag.BoolVar(&noPacks, "no-packs", false, "every file in chunks of its own (checkpoint.pack_small_files: false)")
	flag.StringVar(&profileDir, "cpuprofile", "", "write a CPU profile of each step into this directory (full.pprof, restore.pprof, eval.pprof) and the allocations of all (allocs.pprof; go tool pprof)")
	flag.Parse()
	h := &harness{}
	err := run(h, *size, *small, *dir, *parallel)
	if err == nil && profileDir != "" {
		err = writeAllocs(filepath.Join(profileDir, "allocs.pprof"))
	}
	h.cleanup()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// profileDir is where each step's CPU profile goes ("": none).
var profileDir string

// noPacks turns packing of small files off.
var noPacks bool

// profile starts the CPU profile of a step ("": none); stop ends it.
func profile(step string) (stop func(), err error) {
	if profileDir == "" {
		return func() {}, nil
	}
	if err := os.MkdirAll(profileDir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(profileDir, step+".pprof"))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}

func writeAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// harness stands in for *testing.T so the test S3 server runs here too.
type harness struct{ cleanups []func() }

func (h *harness) Helper()                           {}
func (h *harness) Fatal(args ...any)                 { h.cleanup(); fmt.Fprintln(os.Stderr, args...); os.Exit(1) }
func (h *harness) Fatalf(format string, args ...any) { h.Fatal(fmt.Sprintf(format, args...)) }
func (h *harness) Skip(args ...any)                  { h.Fatal(args...) }
func (h *harness) Cleanup(f func())                  { h.cleanups = append(h.cleanups, f) }
func (h *harness) TempDir() string {
	d, err := os.MkdirTemp("", "mlrb-bench-")
	if err != nil {
		h.Fatal(err)
	}
	h.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

func (h *harness) cleanup() {
	for i := len(h.cleanups) - 1; i >= 0; i-- {
		h.cleanups[i]()
	}
	h.cleanups = nil
}

// resetPeak starts a phase's peak resident set (Linux) from what the
// phase itself needs: the heap an earlier phase left for the collector is
// returned first.
func resetPeak() {
	debug.FreeOSMemory()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			kb, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func rclone(srv *s3test.Server, args ...string) (time.Duration, error) {
	start := time.Now()
	if err := rcloneRun(srv, append([]string{"copy", "--transfers", "8", "--checkers", "16"}, args...)...); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

func rcloneRun(srv *s3test.Server, args ...string) error {
	cmd := exec.Command("rclone", args...)
	cmd.Env = srv.RcloneEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("rclone %v: %v: %s", args, err, out)
	}
	return nil
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// writer stands in for the agent: it writes 1 MiB blocks into the
// workspace, each synced, and keeps the slowest write.
type writer struct {
	stop, done chan struct{}
	worst      time.Duration
	n          int
}

func startWriter(dir string) *writer {
	w := &writer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		f, err := os.Create(filepath.Join(dir, "agent-writes.bin"))
		if err != nil {
			return
		}
		defer func() { _ = f.Close(); _ = os.Remove(f.Name()) }()
		buf := make([]byte, 1<<20)
		for {
			select {
			case <-w.stop:
				return
			default:
			}
			start := time.Now()
			if _, err := f.WriteAt(buf, int64(w.n%64)<<20); err != nil {
				return
			}
			_ = f.Sync()
			w.worst = max(w.worst, time.Since(start))
			w.n++
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return w
}

func (w *writer) finish() (time.Duration, int) {
	close(w.stop)
	<-w.done
	return w.worst, w.n
}

func run(h *harness, gib, small int, scratch string, parallel int) error {
	if scratch == "" {
		d, err := os.MkdirTemp("", "mlrb-ckbench-")
		if err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(d) }()
		scratch = d
	}
	srv := s3test.Start(h)
	// The workspace as the container workspace keeps it: root/app/work
	// on the worker's disk is /app/work in the container.
	root := filepath.Join(scratch, "attempt-1", "root")
	tree := filepath.Join(root, "app", "work")
	total, err := makeTree(tree, gib, small)
	if err != nil {
		return err
	}
	fmt.Printf("workspace: %.0f MiB (65%% in 4 weight files, %d small files) in %s\n", mib(total), small, tree)
	disk, err := diskWrite(scratch, min(total, 2<<30))
	if err != nil {
		return err
	}
	fmt.Printf("the scratch disk writes %.0f MiB/s (sequential, 4 MiB writes, fdatasync at the end: dd's conv=fdatasync)\n", disk)
	copySpeed, err := diskCopy(scratch, min(total, 2<<30))
	if err != nil {
		return err
	}
	fmt.Printf("the scratch disk copies %.0f MiB/s (a file read from the disk and written to it at once: the store here is on the same disk, so a restore does both)\n", copySpeed)
	ctx := context.Background()
	e := checkpoint.New(srv.Store("mlrb"), checkpoint.Options{ChunkSize: 4 << 20, Parallel: parallel, NoPacks: noPacks})
	meta := func(seq int) checkpoint.Meta {
		return checkpoint.Meta{RunID: "bench", Seq: seq, Attempt: 1, Workdir: "app/work", Final: seq == 2}
	}

	tRclone, err := rclone(srv, tree, ":s3:"+srv.Bucket+"/rclone-up")
	if err != nil {
		return err
	}
	// Only the time counts: the copy's bytes would double the disk the
	// benchmark needs.
	if err := rcloneRun(srv, "purge", ":s3:"+srv.Bucket+"/rclone-up"); err != nil {
		return err
	}
	resetPeak()
	stopProfile, err := profile("full")
	if err != nil {
		return err
	}
	start := time.Now()
	m1, err := e.Save(ctx, root, meta(1), nil)
	tFull := time.Since(start)
	stopProfile()
	if err != nil {
		return err
	}
	fmt.Printf("full checkpoint: %s (%.0f MiB/s, uploaded %.0f MiB), rclone copy up: %s (%.0f MiB/s); ratio %.2fx; peak RSS %.0f MiB\n",
		tFull.Round(time.Millisecond), mib(total)/tFull.Seconds(), mib(m1.NewBytes), tRclone.Round(time.Millisecond), mib(total)/tRclone.Seconds(), tRclone.Seconds()/tFull.Seconds(), mib(peakRSS()))

	changed, err := change(tree, total)
	if err != nil {
		return err
	}
	// The agent is never paused (its container keeps running, the engine
	// reads the host's files): what a checkpoint costs it is the slowdown
	// of its own writes, with and without a checkpoint under way.
	quiet := startWriter(tree)
	time.Sleep(3 * time.Second)
	quietWorst, _ := quiet.finish()
	w := startWriter(tree)
	resetPeak()
	start = time.Now()
	m2, err := e.Save(ctx, root, meta(2), m1)
	tInc := time.Since(start)
	busyWorst, writes := w.finish()
	if err != nil {
		return err
	}
	fmt.Printf("incremental after changing %.2f%% of the bytes: %s (%.1f%% of the full time), uploaded %.1f MiB (%.2f%% of the workspace); peak RSS %.0f MiB\n",
		100*float64(changed)/float64(total), tInc.Round(time.Millisecond), 100*tInc.Seconds()/tFull.Seconds(), mib(m2.NewBytes), 100*float64(m2.NewBytes)/float64(total), mib(peakRSS()))
	fmt.Printf("agent during the incremental checkpoint: paused 0 s (never paused); slowest synced 1 MiB write %s over %d writes (without a checkpoint: %s)\n",
		busyWorst.Round(time.Millisecond), writes, quietWorst.Round(time.Millisecond))

	// A new attempt's container workspace, restored from the checkpoint,
	// against rclone copying the same store content down.
	restored := filepath.Join(scratch, "attempt-2", "root")
	resetPeak()
	stopProfile, err = profile("restore")
	if err != nil {
		return err
	}
	start = time.Now()
	err = e.Restore(ctx, m2, restored)
	tRestore := time.Since(start)
	stopProfile()
	if err != nil {
		return err
	}
	peakRestore := peakRSS()
	_ = os.RemoveAll(filepath.Dir(restored))
	down := filepath.Join(scratch, "rclone-down")
	tRDown, err := rclone(srv, ":s3:"+srv.Bucket+"/mlrb/chunks", down)
	if err != nil {
		return err
	}
	_ = os.RemoveAll(down)
	fmt.Printf("restore into a new container workspace (every chunk verified): %s (%.0f MiB/s, %.0f%% of the disk's write speed, %.0f%% of its copy speed), rclone copy down of the same store content: %s; ratio %.2fx; peak RSS %.0f MiB\n",
		tRestore.Round(time.Millisecond), mib(total)/tRestore.Seconds(), 100*mib(total)/tRestore.Seconds()/disk, 100*mib(total)/tRestore.Seconds()/copySpeed, tRDown.Round(time.Millisecond), tRDown.Seconds()/tRestore.Seconds(), mib(peakRestore))

	// What Evaluate does before its evaluator starts: restore what it
	// reads of the final checkpoint (the agent's reports, then its model's
	// directory) into a directory of its own, find the model, read it.
	evalDir := filepath.Join(scratch, "eval")
	resetPeak()
	stopProfile, err = profile("eval")
	if err != nil {
		return err
	}
	start = time.Now()
	var evalBytes int64
	_, err = model.Restore(ctx, e, m2, evalDir, func(n int64) { evalBytes = n })
	stopProfile()
	if err != nil {
		return err
	}
	modelDir, err := model.FindModel(evalDir, filepath.Join(evalDir, "app", "work"))
	if err != nil {
		return err
	}
	check, err := model.CheckConstraints(modelDir, &tasks.Spec{})
	if err != nil {
		return err
	}
	tEval := time.Since(start)
	_ = os.RemoveAll(evalDir)
	fmt.Printf("evaluation start latency (restore what the evaluation reads of the final checkpoint, %.0f MiB of %.0f MiB, find the model, read its headers: %d parameters): %s; peak RSS %.0f MiB\n",
		mib(evalBytes), mib(m2.Bytes), check.Params, tEval.Round(time.Millisecond), mib(peakRSS()))
	return nil
}
