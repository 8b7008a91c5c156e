// Command bundle measures `starter bundle` and `starter verify` on a run
// whose final checkpoint holds a workspace of real size (-gib, random
// bytes: weights do not compress), as an operator and a third party run
// them: the real starter binary, each command's peak resident memory read
// from the kernel (rusage), and verify's throughput beside `sha256sum`
// over the same files, each read from a cold page cache when the machine
// lets the bench drop it (else both from what the cache holds, said so).
// A second bundle into the same directory measures that no chunk is
// written twice.
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mlrb/mlrb/internal/results/runresults"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
	"github.com/mlrb/mlrb/tasks"
)

const runID = "bench-bundle/reference/mini_baby_lm/s0"

func main() {
	gib := flag.Int("gib", 4, "workspace size in GiB")
	dir := flag.String("dir", "", "scratch dir (default: a temp dir); needs about three times -gib free")
	flag.Parse()
	if err := run(*gib, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(gib int, dir string) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "mlrb-bench-bundle-")
		if err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(d) }()
		dir = d
	}
	starter := filepath.Join(dir, "starter")
	if out, err := exec.Command("go", "build", "-o", starter, "github.com/mlrb/mlrb/starter").CombinedOutput(); err != nil {
		return fmt.Errorf("build the starter: %v: %s", err, out)
	}
	state, out := filepath.Join(dir, "state"), filepath.Join(dir, "bundle")
	if err := seedRun(filepath.Join(dir, "ws"), filepath.Join(state, "blobs"), int64(gib)<<30); err != nil {
		return err
	}
	env := append(os.Environ(), "MLRB_DEV_STATE_DIR="+state, "MLRB_BUNDLE_SIGNING_KEY="+filepath.Join(dir, "op"), "MLRB_TEMPORAL_ADDRESS=127.0.0.1:1")
	if _, err := command(env, starter, "keys", "new", "-o", filepath.Join(dir, "op")); err != nil {
		return err
	}
	fmt.Printf("workspace %d GiB in one final checkpoint\n", gib)
	b, err := command(env, starter, "bundle", runID, "-o", out)
	if err != nil {
		return err
	}
	total, files := treeBytes(out)
	fmt.Printf("bundle:       %6.1f s, %6.0f MiB/s, peak RSS %4d MiB (%d files, %.2f GiB)\n", b.wall.Seconds(), mib(total)/b.wall.Seconds(), b.rss>>20, files, float64(total)/(1<<30))
	again, err := command(env, starter, "bundle", runID, "-o", out)
	if err != nil {
		return err
	}
	fmt.Printf("bundle again: %6.1f s, peak RSS %4d MiB: %s", again.wall.Seconds(), again.rss>>20, lastLine(again.out))
	cold := dropCaches()
	sum, err := command(nil, "sh", "-c", "find "+out+" -type f -print0 | xargs -0 sha256sum > /dev/null")
	if err != nil {
		return err
	}
	dropCaches()
	v, err := command(env, starter, "verify", out, "--trust", filepath.Join(dir, "op.pub"))
	if err != nil {
		return err
	}
	note := "each from a cold page cache"
	if !cold {
		note = "the page cache could not be dropped here: both read what it held"
	}
	fmt.Printf("sha256sum:    %6.1f s, %6.0f MiB/s (%s)\n", sum.wall.Seconds(), mib(total)/sum.wall.Seconds(), note)
	fmt.Printf("verify:       %6.1f s, %6.0f MiB/s, peak RSS %4d MiB: %.0f %% of sha256sum's throughput\n", v.wall.Seconds(), mib(total)/v.wall.Seconds(), v.rss>>20,
		100*sum.wall.Seconds()/v.wall.Seconds())
	return nil
}

// seedRun saves a workspace of n random bytes (a few weight files and a
// config) as the run's final checkpoint, stores its result, and removes
// the workspace.
func seedRun(ws, blobs string, n int64) error {
	defer func() { _ = os.RemoveAll(ws) }()
	model := filepath.Join(ws, "output", "model")
	if err := os.MkdirAll(model, 0o755); err != nil {
		return err
	}
	const files = 4
	for i := range files {
		f, err := os.Create(filepath.Join(model, fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, files)))
		if err != nil {
			return err
		}
		_, err = io.CopyN(f, rand.Reader, n/files)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(model, "config.json"), []byte(`{"model_type":"llama"}`), 0o644); err != nil {
		return err
	}
	store, err := blob.NewFS(blobs)
	if err != nil {
		return err
	}
	ctx := context.Background()
	e := checkpoint.New(store, checkpoint.Options{})
	start := time.Now()
	if _, err := e.Save(ctx, ws, checkpoint.Meta{RunID: runID, Seq: 1, Attempt: 1, Final: true}, nil); err != nil {
		return err
	}
	fmt.Printf("seeded the run's final checkpoint in %.1f s\n", time.Since(start).Seconds())
	cat, err := tasks.Load("")
	if err != nil {
		return err
	}
	spec, err := cat.Get("mini_baby_lm")
	if err != nil {
		return err
	}
	res, err := json.Marshal(map[string]any{"run_id": runID, "task": spec.ID, "agent": "reference", "seed": 0, "outcome": "scored", "score": 0.9,
		"spec_hash": spec.Hash(), "checkpoint_log": []map[string]any{{"seq": 1, "attempt": 1, "final": true}}})
	if err != nil {
		return err
	}
	return runresults.Put(ctx, store, runID, res)
}

type ran struct {
	wall time.Duration
	rss  int64
	out  string
}

// command runs a command to its end: its wall time, its peak resident
// memory and its output.
func command(env []string, name string, args ...string) (ran, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = env
	start := time.Now()
	out, err := cmd.CombinedOutput()
	r := ran{wall: time.Since(start), out: string(out)}
	if err != nil {
		return r, fmt.Errorf("%s %s: %v: %s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.rss = ru.Maxrss << 10
	}
	return r, nil
}

// dropCaches empties the page cache (root only), telling whether it could.
func dropCaches() bool {
	syscall.Sync()
	return os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0) == nil
}

func treeBytes(dir string) (int64, int) {
	var n int64
	files := 0
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
			files++
		}
		return nil
	})
	return n, files
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[0] + "\n"
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
