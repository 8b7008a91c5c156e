package workspace

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/sandbox/runtime"
	"github.com/mlrb/mlrb/internal/store/safefs"
	"github.com/mlrb/mlrb/internal/testkit/attack"
	"github.com/mlrb/mlrb/tasks"
)

// TestPrepareNeverMakesDirectoriesThroughALink is audit #17: a restored
// /app/work -> <host dir> must not make the worker (root) create
// <host dir>/output.
func TestPrepareNeverMakesDirectoriesThroughALink(t *testing.T) {
	_, host := attack.Workspace(t)
	w := &DirWorkspace{}
	at := &Attempt{RunID: "r", N: 1, Dir: t.TempDir()}
	attack.Symlink(t, host, filepath.Join(at.Workdir(), "output"))
	if err := w.Prepare(t.Context(), at, "", nil); err != nil {
		t.Fatal(err) // a fresh start: the old tree is removed first
	}
	cat := &Attempt{RunID: "r", N: 2, Dir: t.TempDir()}
	attack.Symlink(t, host, filepath.Join(cat.Root(), "app", "work"))
	cw := &ContainerWorkspace{Workdir: "/app/work"}
	if err := cw.mkdirs(cat); !errors.Is(err, safefs.ErrRefused) {
		t.Fatalf("mkdirs through /app/work -> host: %v; want a refusal", err)
	}
	if _, err := os.Stat(filepath.Join(host, "output")); !os.IsNotExist(err) {
		t.Fatalf("the worker made a directory on the host: %v", err)
	}
}

// TestEmptyFilesCountAgainstTheWorkspaceLimit: a file-count bomb (empty
// files take no blocks) still costs its entries, and a sparse file its
// apparent size (a checkpoint reads it whole).
func TestEmptyFilesCountAgainstTheWorkspaceLimit(t *testing.T) {
	root := t.TempDir()
	for i := 0; i < 1000; i++ {
		if err := os.WriteFile(filepath.Join(root, "e"+strconv.Itoa(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Create(filepath.Join(root, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	used, _, err := diskUsage(root)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(1000*minEntryBytes + 1<<30); used < want {
		t.Fatalf("usage %d; want at least %d", used, want)
	}
}

// TestHardLinkBombCounts (audit N3): a thousand names of one file are a
// thousand entries against the workspace limit, not one file.
func TestHardLinkBombCounts(t *testing.T) {
	root := t.TempDir()
	first := filepath.Join(root, "f")
	if err := os.WriteFile(first, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		if err := os.Link(first, filepath.Join(root, "l"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	used, entries, err := diskUsage(root)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(1001 * minEntryBytes); used < want || entries != 1001 {
		t.Fatalf("1,001 names of one file count %d bytes, %d entries; want at least %d bytes, 1,001 entries", used, entries, want)
	}
}

// TestContainersGetADoorNotANetwork: agents (and evaluators whose task
// asks for the network) share a door's network (nothing but loopback,
// the relay to the worker's gateway) and are told it as their proxy; an
// evaluator of a task that does not ask (audit N12: the images run
// offline, and load what an agent made) and a check get no network at
// all.
func TestContainersGetADoorNotANetwork(t *testing.T) {
	w := &ContainerWorkspace{BuiltinImage: "agent:img", EvalImage: "eval:img", Self: "/mlrb", Workdir: "/app/work"}
	at := &Attempt{RunID: "r", N: 1, Dir: t.TempDir(), Door: filepath.Join(t.TempDir(), "door-a")}
	ev := &EvalDirs{Dir: t.TempDir(), Door: filepath.Join(t.TempDir(), "door-e"), ResultsName: ResultsName(), Network: true}
	offline := *ev
	offline.Network = false
	if e := w.EvalTask(&offline, []string{"e"}, ""); e.Network != runtime.NetworkNone || e.Door != nil || e.Env["HTTPS_PROXY"] != "" {
		t.Errorf("an offline evaluator: network %q, door %+v", e.Network, e.Door)
	}
	env := contract.Env{}
	for name, spec := range map[string]runtime.TaskSpec{"agent": w.AgentTask(at, nil, "", &env), "evaluator": w.EvalTask(ev, []string{"e"}, "")} {
		if spec.Door == nil || spec.Door.Image != "agent:img" || spec.Env["HTTPS_PROXY"] != "http://"+DoorAddr || spec.Network != "" {
			t.Errorf("%s: door %+v, proxy %q, network %q", name, spec.Door, spec.Env["HTTPS_PROXY"], spec.Network)
		}
	}
	if c := w.CheckTask(ev, "/x/0.lean", "0.lean", []string{"check", "{item}"}, ""); c.Network != runtime.NetworkNone || c.Door != nil || len(c.Binds) != 1 {
		t.Errorf("check: network %q, door %+v, binds %v", c.Network, c.Door, c.Binds)
	}
}

// TestDeepTreeIsABreach (audit H2): what lies below safefs.MaxDepth
// directories cannot be measured, so the walk that meets it says so
// instead of counting the directory alone: a 1 MiB file at depth 600 is
// never outside every bound.
func TestDeepTreeIsABreach(t *testing.T) {
	root := t.TempDir()
	deep := filepath.Join(root, strings.Repeat("d/", 600))
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(deep, "big"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := diskUsage(root)
	var u *unmeasurable
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "512") {
		t.Fatalf("a tree 600 deep measured: %v", err)
	}
}

// Audit M4 and L8: what the layer holds (its entries too: an empty file
// is an inode of the host's disk) adds to the workspace's measure, and a
// layer that cannot be measured fails the measurement instead of
// counting as empty.
func TestMeasureCountsTheLayer(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := &measure{outside: func(context.Context) (int64, int64, error) { return 5 << 30, 2_000_000, nil }}
	used, entries, err := m.usage(context.Background(), root)
	if err != nil || used < 5<<30 || entries != 2_000_001 {
		t.Fatalf("usage = %d bytes, %d entries, %v", used, entries, err)
	}
	m = &measure{outside: func(context.Context) (int64, int64, error) { return 0, 0, context.DeadlineExceeded }}
	if _, _, err := m.usage(context.Background(), root); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("an unmeasurable layer: %v", err)
	}
}

// TestBoundFollowsTheTask: without limits of the runtime's own, a task
// runs under its spec's memory and CPUs (never more CPUs than the host
// has); the runtime's own limits stand.
func TestBoundFollowsTheTask(t *testing.T) {
	a := &Sandbox{LogLimit: 7}
	task := &tasks.Spec{Resources: tasks.Resources{CPUs: 1 << 20, MemoryGB: 3}}
	var spec runtime.TaskSpec
	a.Bound(&spec, task)
	if spec.MemoryBytes != 3<<30 || spec.CPUs != float64(goruntime.NumCPU()) || spec.LogLimit != 7 {
		t.Fatalf("bound = %+v", spec)
	}
	own := runtime.TaskSpec{MemoryBytes: 1 << 20, CPUs: 0.5}
	a.Bound(&own, task)
	if own.MemoryBytes != 1<<20 || own.CPUs != 0.5 {
		t.Fatalf("the runtime's own limits were replaced: %+v", own)
	}
}
