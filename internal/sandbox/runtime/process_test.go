package runtime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestProcessLifecycle(t *testing.T) {
	dir := t.TempDir()
	p, err := NewProcess(filepath.Join(dir, "procs"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("SECRET_TOKEN", "do-not-leak")
	log := filepath.Join(dir, "out.log")
	h, err := p.Start(context.Background(), TaskSpec{
		Name: "env", Command: []string{"/bin/sh", "-c", "env; exit 3"}, Dir: dir, LogPath: log,
		Env: map[string]string{"MLRB_TASK": "t"},
	})
	if err != nil {
		t.Fatal(err)
	}
	res := <-h.Wait()
	if res.ExitCode != 3 || res.Successful() {
		t.Fatalf("exit = %+v", res)
	}
	out, _ := os.ReadFile(log)
	if !strings.Contains(string(out), "MLRB_TASK=t") || strings.Contains(string(out), "do-not-leak") {
		t.Fatalf("task env:\n%s", out)
	}

	h, err = p.Start(context.Background(), TaskSpec{Name: "term", Command: []string{"sleep", "30"}, Dir: dir, LogPath: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if res := <-h.Wait(); res.Signal != int(syscall.SIGTERM) {
		t.Fatalf("exit = %+v", res)
	}
	if _, err := p.Start(context.Background(), TaskSpec{Name: "missing", Command: []string{"/no/such/binary"}, Dir: dir, LogPath: log}); err == nil {
		t.Fatal("starting a missing binary must fail")
	}
}

// TestReapKillsWhatAnEarlierWorkerLeft: a runtime on the same state dir
// (a restarted worker) kills a task whose record it finds.
func TestReapKillsWhatAnEarlierWorkerLeft(t *testing.T) {
	dir := t.TempDir()
	old, _ := NewProcess(filepath.Join(dir, "procs"))
	h, err := old.Start(context.Background(), TaskSpec{Name: "agent-run-1", Command: []string{"sleep", "30"}, Dir: dir, LogPath: filepath.Join(dir, "log")})
	if err != nil {
		t.Fatal(err)
	}
	restarted, _ := NewProcess(filepath.Join(dir, "procs"))
	n, err := restarted.Reap(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("Reap = %d, %v; want 1 killed", n, err)
	}
	select {
	case res := <-h.Wait():
		if res.Signal != int(syscall.SIGKILL) {
			t.Fatalf("exit = %+v", res)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reaped task still running")
	}
	if n, _ := restarted.Reap(context.Background()); n != 0 {
		t.Fatalf("second Reap killed %d", n)
	}
}

func TestLogRedaction(t *testing.T) {
	dir := t.TempDir()
	p, _ := NewProcess(filepath.Join(dir, "procs"))
	log := filepath.Join(dir, "log")
	h, err := p.Start(context.Background(), TaskSpec{
		Name: "leaky", Dir: dir, LogPath: log,
		Command: []string{"/bin/sh", "-c", `echo "key=$OPENAI_API_KEY"; printf 'tail sk-fake'; printf '%s\n' '-0123'`},
		Env:     map[string]string{"OPENAI_API_KEY": "sk-fake-0123"},
		Redact:  []string{"sk-fake-0123"},
	})
	if err != nil {
		t.Fatal(err)
	}
	<-h.Wait()
	out, _ := os.ReadFile(log)
	if strings.Contains(string(out), "sk-fake-0123") || !strings.Contains(string(out), "key=[REDACTED]") || !strings.Contains(string(out), "tail [REDACTED]") {
		t.Fatalf("log = %q", out)
	}
}
