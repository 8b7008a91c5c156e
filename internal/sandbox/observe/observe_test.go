package observe

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/store/checkpoint"
	"github.com/mlrb/mlrb/internal/testkit/testenv"
)

// standInSMI writes an nvidia-smi that answers the two queries as the
// real one does with --format=csv,noheader,nounits (one line a device or
// process, ", " between fields, "[N/A]" for what a device does not
// report), from files the test rewrites, and logs its arguments.
func standInSMI(t *testing.T) (cmd, gpus, apps, args string) {
	t.Helper()
	dir := t.TempDir()
	gpus, apps, args = filepath.Join(dir, "gpus.csv"), filepath.Join(dir, "apps.csv"), filepath.Join(dir, "args")
	script := `#!/bin/sh
echo "$@" >> ` + args + `
case "$1" in
--query-gpu=*) cat ` + gpus + ` ;;
--query-compute-apps=*) cat ` + apps + ` ;;
*) echo "unknown query $1" >&2; exit 2 ;;
esac
`
	cmd = filepath.Join(dir, "nvidia-smi")
	if err := os.WriteFile(cmd, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for f, body := range map[string]string{gpus: "", apps: ""} {
		if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return cmd, gpus, apps, args
}

func TestGPUQueryReadsNvidiaSMIsFormat(t *testing.T) {
	cmd, gpus, apps, args := standInSMI(t)
	write(t, gpus, "2, 87, 30512, 312.45\n3, 0, 0, [N/A]\n")
	write(t, apps, "4242, 30000\n4243, 512\n")
	q := GPUQuery{Command: []string{cmd}}
	at := time.Unix(1_800_000_000, 0)
	s, err := q.Devices(t.Context(), []int{2, 3}, at)
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 2 || s[0].Index != 2 || s[0].Util != 87 || s[0].MemMiB != 30512 || s[0].PowerW == nil || *s[0].PowerW != 312.45 || s[1].PowerW != nil || !s[1].At.Equal(at) {
		t.Fatalf("samples %+v", s)
	}
	a, err := q.Apps(t.Context(), []int{2, 3})
	if err != nil || a[4242] != 30000 || a[4243] != 512 {
		t.Fatalf("apps %v, %v", a, err)
	}
	b, _ := os.ReadFile(args)
	if !strings.Contains(string(b), "--query-gpu=index,utilization.gpu,memory.used,power.draw --format=csv,noheader,nounits -i 2,3") {
		t.Fatalf("asked %q", b)
	}
	write(t, gpus, "garbage\n")
	if _, err := q.Devices(t.Context(), []int{2}, at); err == nil {
		t.Fatal("a line that is no device read as one")
	}
}

// TestSamplerSeesTheTree: a real process tree is sampled: the root, a
// child that ends, one that lives on; command lines scrubbed; the GPU
// memory the stand-in driver reports lands on the process holding it.
func TestSamplerSeesTheTree(t *testing.T) {
	cmd, gpus, apps, _ := standInSMI(t)
	write(t, gpus, "0, 55, 1000, 100\n")
	root := exec.Command("/bin/sh", "-c", "sleep 0.3; sleep 30 # token=s3cr3t")
	root.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := root.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Kill(-root.Process.Pid, syscall.SIGKILL); _ = root.Wait() }()
	tree := &Tree{Root: root.Process.Pid}
	s, err := Start(tree, Options{ProcInterval: 20 * time.Millisecond, GPUInterval: 20 * time.Millisecond, GPU: &GPUQuery{Command: []string{cmd}},
		Redact: func(c string) string { return strings.ReplaceAll(c, "s3cr3t", "***") }},
		Observation{RunID: "r", Attempt: 2, Devices: []int{0}, StartAgentS: 100})
	if err != nil {
		t.Fatal(err)
	}
	// The long sleep holds GPU memory, as the driver would say.
	var long int
	for deadline := time.Now().Add(5 * time.Second); long == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, p := range s.Snapshot().Procs {
			if p.Command == "sleep 30" {
				long = p.PID
			}
		}
	}
	if long == 0 {
		t.Fatalf("the long child never seen: %+v", s.Snapshot().Procs)
	}
	write(t, apps, strconv.Itoa(long)+", 2048\n")
	time.Sleep(100 * time.Millisecond)
	s.Stopping()
	o := s.Stop("deadline")
	var sawRoot, sawShort bool
	for _, p := range o.Procs {
		switch {
		case p.Root:
			sawRoot = strings.Contains(p.Command, "token=***") && !strings.Contains(p.Command, "s3cr3t")
		case p.Command == "sleep 0.3":
			sawShort = !p.End.IsZero() && p.PPID == root.Process.Pid
		case p.PID == long:
			if p.GPUMiB != 2048 || !p.End.IsZero() || p.PeakRSS <= 0 {
				t.Fatalf("the long child %+v", p)
			}
		}
	}
	if !sawRoot || !sawShort || o.Ended != "deadline" || o.StopAt.IsZero() || len(o.GPU) == 0 || o.GPU[0].Util != 55 || o.StartAgentS != 100 {
		t.Fatalf("observation %+v", o)
	}
	r := Derive(Input{Observations: []*Observation{o}, MinExperiment: time.Hour, BudgetS: 3600, AgentS: 101})
	if len(r.Experiments) != 1 || r.Experiments[0].PID != long || r.Experiments[0].Outcome != CutOff || r.Experiments[0].GPUHours <= 0 {
		t.Fatalf("experiments %+v", r.Experiments)
	}
}

// TestTreeFindsItsProcesses: the tree holds the root's descendants, one
// in a session of its own whose command name holds ") " and spaces (its
// stat read right), and a process of the root's group that left the
// tree (reparented, as a daemon is); nothing else.
func TestTreeFindsItsProcesses(t *testing.T) {
	setsid, err := exec.LookPath("setsid")
	if err != nil {
		testenv.Missing(t, "setsid (util-linux)")
	}
	odd := filepath.Join(t.TempDir(), "x) 9 9 (y")
	if err := os.Symlink("/bin/sh", odd); err != nil {
		t.Fatal(err)
	}
	root := exec.Command("/bin/sh", "-c", `"$0" "$1" -c 'sleep 30' & (sleep 30 &) ; sleep 30`, setsid, odd)
	root.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := root.Start(); err != nil {
		t.Fatal(err)
	}
	other := exec.Command("sleep", "30")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	tree := &Tree{Root: root.Process.Pid}
	// The root, its sleep, the orphaned sleep, the odd shell, its sleep.
	var pids []int
	defer func() {
		for _, p := range append(pids, -root.Process.Pid, other.Process.Pid) {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		_, _ = root.Process.Wait()
		_, _ = other.Process.Wait()
	}()
	for deadline := time.Now().Add(5 * time.Second); len(pids) != 5 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if pids, err = tree.PIDs(); err != nil {
			t.Fatal(err)
		}
	}
	if len(pids) != 5 || pids[0] != root.Process.Pid || slices.Contains(pids, other.Process.Pid) {
		t.Fatalf("tree of %d: %v (not %d)", root.Process.Pid, pids, other.Process.Pid)
	}
	// The root ended and reaped while its group lives: still walked.
	if err := syscall.Kill(root.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = root.Process.Wait()
	if pids, err = tree.PIDs(); err != nil || len(pids) < 2 {
		t.Fatalf("tree of a gone root whose group lives: %v (%v), want its group too", pids, err)
	}
}

// TestTreeOfAnEndedAgent: an agent that ended and left no process in
// its group is its root alone, as a walk of /proc finds it.
func TestTreeOfAnEndedAgent(t *testing.T) {
	root := exec.Command("/bin/sh", "-c", "exit 0")
	root.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := root.Run(); err != nil {
		t.Fatal(err)
	}
	tree := &Tree{Root: root.Process.Pid}
	pids, err := tree.PIDs()
	walked, werr := tree.walk()
	if err != nil || werr != nil || !slices.Equal(pids, []int{root.Process.Pid}) || !slices.Equal(walked, pids) {
		t.Fatalf("tree of an ended agent: %v (%v), a walk %v (%v), want the root alone", pids, err, walked, werr)
	}
}

func BenchmarkTreePIDs(b *testing.B) {
	tree := &Tree{Root: os.Getpid()}
	for b.Loop() {
		if _, err := tree.PIDs(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDerive: a shell the agent keeps ran two experiments one after the
// other; a training process with workers is one experiment; one was
// OOM-killed, one cut off by the deadline; short commands are none. The
// first produced a model that a mark scored at the next checkpoint, which
// still held it.
func TestDerive(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	o := &Observation{RunID: "r", Attempt: 1, Start: t0, End: at(4000), StopAt: at(3900), Ended: "deadline", Devices: []int{0}, OOMKnown: true,
		Procs: []Proc{
			{PID: 10, PPID: 1, Root: true, Command: "agent", Start: t0},
			{PID: 11, PPID: 10, Command: "bash", Start: at(1)},
			{PID: 12, PPID: 11, Command: "python train.py --lr 1e-3", Start: at(100), End: at(1000), GPUMiB: 30000},
			{PID: 13, PPID: 12, Command: "python train.py (worker)", Start: at(101), End: at(999)},
			{PID: 14, PPID: 12, Command: "python train.py (worker)", Start: at(101), End: at(999)},
			{PID: 15, PPID: 11, Command: "python train.py --lr 1e-2", Start: at(1200), End: at(1300), OOMKilled: true, GPUMiB: 40000},
			{PID: 16, PPID: 11, Command: "ls", Start: at(1400), End: at(1401)},
			{PID: 17, PPID: 11, Command: "python train.py --epochs 50", Start: at(2000), GPUMiB: 30000},
		},
		GPU: []GPUSample{{At: at(500), Util: 90}, {At: at(1250), Util: 100}, {At: at(3000), Util: 80}, {At: at(1600), Util: 0}},
		Checkpoints: []CheckpointAdds{
			{Seq: 1, At: at(600), AgentS: 600},
			{Seq: 2, At: at(1200), AgentS: 1200, Models: []string{"output/model"}},
			{Seq: 3, At: at(1800), AgentS: 1800},
		},
	}
	o.Calls = []Span{{Start: at(1300), End: at(1310)}}
	r := Derive(Input{Observations: []*Observation{o}, Scores: map[int]Scored{3: {Score: 0.71, Split: "dev"}}, MinExperiment: time.Minute, BudgetS: 4000, AgentS: 4000})
	want := []struct {
		pid     int
		outcome Outcome
		model   bool
	}{{12, Ended, true}, {15, OOMKilled, false}, {17, CutOff, false}}
	if len(r.Experiments) != len(want) {
		t.Fatalf("experiments %+v", r.Experiments)
	}
	for i, w := range want {
		e := r.Experiments[i]
		if e.PID != w.pid || e.Outcome != w.outcome || (e.Model != nil) != w.model {
			t.Fatalf("experiment %d: %+v, want %+v", i, e, w)
		}
	}
	if m := r.Experiments[0].Model; m.Checkpoint != 2 || m.Score == nil || *m.Score != 0.71 || *r.Experiments[0].MeanUtil != 90 {
		t.Fatalf("first experiment %+v model %+v", r.Experiments[0], m)
	}
	m := r.Measures
	// 900 s + 100 s + 2000 s (to the end) of one device.
	if m.Experiments != 3 || m.ByOutcome[string(CutOff)] != 1 || !near(m.GPUHours, 3000.0/3600) || !near(m.GPUHoursNoModel, 2100.0/3600) ||
		!near(m.CutOffHours, 2000.0/3600) || m.FirstModelS == nil || *m.FirstModelS != 1200 || !near(m.PerHour, 3/(4000.0/3600)) {
		t.Fatalf("measures %+v", m)
	}
	// Gaps: 0–100, 1000–1200, 1310–2000 (the longest: the ls is no experiment).
	if m.LongestStallS != 690 {
		t.Fatalf("longest stall %v, want 690", m.LongestStallS)
	}
	if m.GPUBusyShare == nil || !near(*m.GPUBusyShare, 0.675) {
		t.Fatalf("GPU busy share %v, want the mean utilisation 67.5%% over the budget", m.GPUBusyShare)
	}
}

// TestLostAttempt: processes alive at the last sample of an attempt that
// never ended (its worker lost) were lost with it.
func TestLostAttempt(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	o := &Observation{Attempt: 1, Start: t0, End: t0.Add(time.Hour), Procs: []Proc{{PID: 2, PPID: 1, Command: "python train.py", Start: t0.Add(time.Minute)}}}
	r := Derive(Input{Observations: []*Observation{o}, AgentS: 3600, BudgetS: 7200})
	if len(r.Experiments) != 1 || r.Experiments[0].Outcome != Lost || r.Measures.GPUBusyShare != nil {
		t.Fatalf("%+v", r)
	}
}

func TestCgroupOfThisProcess(t *testing.T) {
	c, err := CgroupOf(os.Getpid(), "/sys/fs/cgroup")
	if err != nil {
		testenv.Missing(t, "a cgroup memory controller under /sys/fs/cgroup: "+err.Error())
	}
	pids, err := c.PIDs()
	if err != nil || !slices.Contains(pids, os.Getpid()) {
		t.Fatalf("cgroup %s holds %v (%v), not this process", c.Dir, pids, err)
	}
	if _, ok := c.OOMKills(); !ok {
		t.Fatalf("cgroup %s: no oom_kill count", c.Memory)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestAdds: a checkpoint adds the model directories whose files are new
// or changed, counts changed code and the bytes logs grew; the files it
// shares with the last one add nothing.
func TestAdds(t *testing.T) {
	reg := func(p string, size int64, chunk string) checkpoint.File {
		return checkpoint.File{Path: p, Size: size, Chunks: []string{chunk}}
	}
	prev := &checkpoint.Manifest{Seq: 1, Files: []checkpoint.File{
		reg("train.py", 10, "a"), reg("out/run1/config.json", 5, "c"), reg("out/run1/model.safetensors", 100, "w1"), reg("train.log", 50, "l1"),
	}}
	next := &checkpoint.Manifest{Seq: 2, AgentSeconds: 600, Files: []checkpoint.File{
		reg("train.py", 12, "b"), reg("out/run1/config.json", 5, "c"), reg("out/run1/model.safetensors", 100, "w1"),
		reg("out/run2/config.json", 5, "c"), reg("out/run2/model.safetensors", 100, "w2"), reg("train.log", 80, "l2"), reg("notes.md", 3, "n"),
	}}
	a := Adds(prev, next)
	if a.Seq != 2 || a.AgentS != 600 || !slices.Equal(a.Models, []string{"out/run2"}) || a.CodeChanged != 1 || a.LogsGrew != 30 {
		t.Fatalf("adds %+v", a)
	}
	if first := Adds(nil, prev); !slices.Equal(first.Models, []string{"out/run1"}) || first.LogsGrew != 50 {
		t.Fatalf("first checkpoint adds %+v", first)
	}
	// Audit M4: a config touched later is no change of the model.
	touched := &checkpoint.Manifest{Seq: 3, Files: slices.Clone(next.Files)}
	touched.Files[1] = reg("out/run1/config.json", 6, "c2")
	if a := Adds(next, touched); len(a.Models) != 0 {
		t.Fatalf("a touched config changed the model: %+v", a.Models)
	}
	// A container's snapshot holds the work dir under app/work.
	in := &checkpoint.Manifest{Seq: 1, Workdir: "app/work", Files: []checkpoint.File{reg("app/work/output/model/config.json", 5, "c"), reg("app/work/output/model/model.json", 9, "m")}}
	if a := Adds(nil, in); !slices.Equal(a.Models, []string{"output/model"}) {
		t.Fatalf("under the work dir: %+v", a.Models)
	}
}

// fakeScope is a cgroup the test drives: its processes and its OOM count.
type fakeScope struct {
	mu   sync.Mutex
	pids []int
	ooms int
}

func (f *fakeScope) PIDs() ([]int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.pids), nil
}
func (f *fakeScope) RootPID() int { return 0 }
func (f *fakeScope) OOMKills() (int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ooms, true
}

// TestOOMKillCountedBeforeTheVictimLeaves: the kernel counts an OOM kill
// while its victim is still in the cgroup (exiting); the kill goes to it
// once it is gone, not to nobody.
func TestOOMKillCountedBeforeTheVictimLeaves(t *testing.T) {
	victim := exec.Command("sleep", "30")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = victim.Process.Kill(); _ = victim.Wait() }()
	sc := &fakeScope{pids: []int{victim.Process.Pid}}
	s, err := Start(sc, Options{ProcInterval: time.Hour}, Observation{})
	if err != nil {
		t.Fatal(err)
	}
	// Samples at the test's pace: listed; counted, still listed; gone.
	s.Stopping()
	sc.mu.Lock()
	sc.ooms = 1
	sc.mu.Unlock()
	s.Stopping()
	sc.mu.Lock()
	sc.pids = nil
	sc.mu.Unlock()
	o := s.Stop("exited")
	if len(o.Procs) != 1 || !o.Procs[0].OOMKilled || o.Procs[0].End.IsZero() {
		t.Fatalf("procs %+v", o.Procs)
	}
}

// TestModelOfAnExperimentSeenGoneLate: an experiment last seen alive at
// 100 s and first seen gone at 300 s ended between the two; the checkpoint
// begun at 200 s may have missed the model it wrote last, so its model is
// the next checkpoint's, begun after it was known to be gone.
func TestModelOfAnExperimentSeenGoneLate(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	o := &Observation{RunID: "r", Attempt: 1, Start: t0, End: at(600), Ended: "exited",
		Procs: []Proc{
			{PID: 10, PPID: 1, Root: true, Command: "agent", Start: t0},
			{PID: 11, PPID: 10, Command: "python train.py", Start: at(1), End: at(100), Gone: at(300)},
		},
		Checkpoints: []CheckpointAdds{
			{Seq: 1, At: at(200), AgentS: 200},
			{Seq: 2, At: at(400), AgentS: 400, Models: []string{"output/model"}},
		},
	}
	r := Derive(Input{Observations: []*Observation{o}, MinExperiment: time.Minute})
	if len(r.Experiments) != 1 || r.Experiments[0].Model == nil || r.Experiments[0].Model.Checkpoint != 2 {
		t.Fatalf("experiments %+v, want one whose model is checkpoint 2's", r.Experiments)
	}
	if r.Experiments[0].EndS != 100 {
		t.Fatalf("end %v s, want the last sight, 100 s", r.Experiments[0].EndS)
	}
}

// TestHugeCommandLineIsReadBounded (audit H1): a process with a 1 MiB
// command line costs the sampler at most cmdlineRead bytes of it, and a
// secret straddling the stored cut is still redacted whole.
func TestHugeCommandLineIsReadBounded(t *testing.T) {
	args := []string{"30", strings.Repeat("a", MaxCommand-len("sleep 30 ")-3) + " s3cr3t-tail"}
	for range 8 {
		args = append(args, strings.Repeat("x", 128<<10-1)) // MAX_ARG_STRLEN each: 1 MiB in all
	}
	p := exec.Command("sleep", args...)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Process.Kill(); _ = p.Wait() }()
	// Until its exec is done, the child shows its parent's command line.
	cmd := readCmdline(p.Process.Pid)
	for deadline := time.Now().Add(10 * time.Second); !strings.HasPrefix(cmd, "sleep") && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		cmd = readCmdline(p.Process.Pid)
	}
	if len(cmd) != cmdlineRead || !strings.HasPrefix(cmd, "sleep 30 aaa") {
		t.Fatalf("read %d bytes of a 1 MiB command line, want %d", len(cmd), cmdlineRead)
	}
	s := &Sampler{o: Options{Redact: func(c string) string { return strings.ReplaceAll(c, "s3cr3t-tail", "***") }}}
	if c := s.command(cmd); len(c) > MaxCommand+len("…") || strings.Contains(c, "s3c") {
		t.Fatalf("stored command %d bytes: %q", len(c), c[max(0, len(c)-40):])
	}
	// Audit M4: an evaluator named past the head kept is still named.
	s.o.Watch = []string{"lm_eval", "reference-eval"}
	padded := "python3 -c " + strings.Repeat("#", 2*MaxCommand) + " import lm_eval"
	if c := s.command(padded); !strings.HasSuffix(c, "[further on: lm_eval]") {
		t.Fatalf("a padded command line hides its evaluator: %q", c[max(0, len(c)-60):])
	}
}

// TestCallSpansBounded (audit H3): past MaxCalls, a call's span is merged
// into the last one, its dollars kept.
func TestCallSpansBounded(t *testing.T) {
	s := &Sampler{now: time.Now}
	t0 := time.Unix(1_800_000_000, 0)
	for i := range MaxCalls + 500 {
		s.Call(Span{Start: t0.Add(time.Duration(i) * time.Second), End: t0.Add(time.Duration(i)*time.Second + time.Millisecond), USD: 0.01})
	}
	o := s.Snapshot()
	usd := 0.0
	for _, c := range o.Calls {
		usd += c.USD
	}
	if len(o.Calls) != MaxCalls || math.Abs(usd-0.01*float64(MaxCalls+500)) > 1e-6 || !o.Calls[MaxCalls-1].End.Equal(t0.Add((MaxCalls+499)*time.Second+time.Millisecond)) {
		t.Fatalf("%d spans, $%.2f, last ends %v", len(o.Calls), usd, o.Calls[len(o.Calls)-1].End)
	}
}
