package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStarterFindsTheRunsStore: as a new user would, the worker runs with
// its own state dir and the starter with the default one. The commands
// that read the store find the store the run wrote (the run names it);
// with no server to ask, they name the store they read and how to point
// them at the right one.
func TestStarterFindsTheRunsStore(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	w := e.start("worker", "--dev")
	e.waitServer()
	runID := e.startRun("--task", "mini_baby_lm", "--agent", "reference", "--seed", "1")
	if _, errs, code := e.starter("result", runID, "--wait"); code != 0 {
		t.Fatalf("result: exit %d: %s", code, errs)
	}
	// Disk hygiene: the attempt's workspace and the evaluation's directory
	// are gone with them; the run's work is in the store.
	for _, d := range []string{"runs", "eval"} {
		if entries, _ := os.ReadDir(filepath.Join(e.state, "work", d)); len(entries) != 0 {
			t.Errorf("work/%s still holds %v after the run ended", d, entries[0].Name())
		}
	}
	elsewhere := append([]string{}, e.vars...)
	e.vars = append(e.vars, "MLRB_DEV_STATE_DIR="+filepath.Join(t.TempDir(), "default-state"))
	var cks []struct {
		Seq   int  `json:"seq"`
		Final bool `json:"final"`
	}
	out, errs, code := e.starter("checkpoint", "list", runID, "--json")
	if code != 0 || !strings.Contains(errs, "keeps its checkpoints and results in fs:"+filepath.Join(e.state, "blobs")) {
		t.Fatalf("checkpoint list from another state dir: exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
	e.starterJSON(&cks, "checkpoint", "list", runID, "--json")
	if len(cks) == 0 || !cks[len(cks)-1].Final {
		t.Fatalf("checkpoints %+v: want the run's, ending with the final one", cks)
	}
	if logs, errs, code := e.starter("logs", runID); code != 0 || logs == "" {
		t.Fatalf("logs from another state dir: exit %d: %s", code, errs)
	}
	w.stop(t, 30*time.Second)
	_, errs, code = e.starter("checkpoint", "list", runID)
	if code != 2 || !strings.Contains(errs, "no committed checkpoint in the store fs:") || !strings.Contains(errs, "--state-dir") {
		t.Fatalf("without a server: exit %d: %s", code, errs)
	}
	e.vars = elsewhere
	if _, errs, code := e.starter("checkpoint", "list", runID); code != 0 {
		t.Fatalf("with the worker's state dir: exit %d: %s", code, errs)
	}
}
