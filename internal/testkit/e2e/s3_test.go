package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/testkit/s3test"
)

func s3Env(t *testing.T, srv *s3test.Server) *env {
	e := newEnv(t,
		"MLRB_STORAGE_KIND=s3",
		"MLRB_STORAGE_S3_BUCKET="+srv.Bucket,
		"MLRB_STORAGE_S3_ENDPOINT="+srv.Endpoint,
		"MLRB_STORAGE_S3_PATH_STYLE=true",
		"MLRB_STORAGE_S3_ACCESS_KEY_ID="+s3test.AccessKey,
		"MLRB_STORAGE_S3_SECRET_ACCESS_KEY="+s3test.SecretKey,
		"MLRB_STORAGE_S3_MAX_ATTEMPTS=2",
		"MLRB_CHECKPOINT_INTERVAL=2s",
		"MLRB_CHECKPOINT_ALERT_AFTER=2",
		"MLRB_AGENT_HEARTBEAT_TIMEOUT=10s",
		"MLRB_AGENT_GRACE=2s",
	)
	e.addTask("e2e_s3", "mini_baby_lm", map[string]string{"trials: 24": "trials: 15", "trial_seconds: 0.4": "trial_seconds: 0.8"})
	return e
}

// TestS3OutageDuringRun: the object store dies mid-run; checkpoints fail
// and the status says so, the agent keeps running, and once the store is
// back the final checkpoint commits and the run is scored in one attempt.
// Then the user's tools: list, restore and GC over the same store.
func TestS3OutageDuringRun(t *testing.T) {
	parallel(t)
	srv := s3test.Start(t)
	e := s3Env(t, srv)
	e.start("worker", "--dev")
	e.waitServer()
	runID := e.startRun("--task", "e2e_s3", "--seed", "3", "--time-limit", "40s")
	e.waitCheckpoints(runID, 1)
	srv.Stop()
	var st struct {
		Phase              string `json:"phase"`
		CheckpointFailures int    `json:"checkpoint_failures"`
		CheckpointStale    bool   `json:"checkpoint_stale"`
		CheckpointError    string `json:"checkpoint_error"`
		LastCheckpointAgeS *float64
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		out, _, code := e.starter("status", runID, "--json")
		if code == 0 && json.Unmarshal([]byte(out), &st) == nil && st.CheckpointStale {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	if !st.CheckpointStale || st.CheckpointFailures < 2 || st.CheckpointError == "" {
		e.dumpLogs()
		t.Fatalf("status during the outage = %+v", st)
	}
	if pids := e.agentPIDs(); len(pids) != 1 {
		t.Fatalf("the agent must keep running during a store outage, found %v", pids)
	}
	srv.Restart()
	var res result
	e.starterJSON(&res, "result", runID, "--wait", "--json")
	if res.Outcome != "scored" || res.Attempts != 1 || res.Score == nil {
		e.dumpLogs()
		t.Fatalf("result = %+v", res)
	}

	out, errs, code := e.starter("checkpoint", "list", runID)
	if code != 0 || !strings.Contains(out, "true") {
		t.Fatalf("checkpoint list (exit %d): %s %s", code, out, errs)
	}
	dir := filepath.Join(t.TempDir(), "ws")
	if _, errs, code := e.starter("checkpoint", "restore", runID, dir); code != 0 {
		t.Fatalf("checkpoint restore: %s", errs)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "output", "submission.json")); err != nil || !strings.Contains(string(b), "output/model") {
		t.Fatalf("restored workspace lacks the submission: %v", err)
	}
	out, errs, code = e.starter("storage", "gc", "--dry-run")
	if code != 0 || !strings.Contains(out, "would delete") {
		t.Fatalf("storage gc --dry-run (exit %d): %s %s", code, out, errs)
	}
	t.Logf("%s", strings.TrimSpace(out))
}
