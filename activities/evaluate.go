package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/internal/lmeval"
	"github.com/mlrb/mlrb/internal/runtime"
	"github.com/mlrb/mlrb/internal/safetensors"
	"github.com/mlrb/mlrb/tasks"
)

// Evaluate restores the final checkpoint into a fresh directory (never the
// agent's), finds the model, checks the task's constraints, runs the
// evaluator as its own process and reads its lm-eval results.
func (a *Activities) Evaluate(ctx context.Context, in EvalInput) (*EvalResult, error) {
	info := activity.GetInfo(ctx)
	dir := filepath.Join(a.WorkDir, "eval", runKey(in.RunID), fmt.Sprintf("try-%d", info.Attempt))
	_ = os.RemoveAll(dir)
	workspace := filepath.Join(dir, "workspace")
	m, err := a.Engine.Load(ctx, in.RunID, in.Final.Seq)
	if err != nil {
		return nil, fmt.Errorf("final checkpoint: %w", err)
	}
	if err := a.Engine.Restore(ctx, m, workspace); err != nil {
		return nil, fmt.Errorf("restore final checkpoint: %w", err)
	}
	root := workspace
	workspace = filepath.Join(workspace, filepath.FromSlash(m.Workdir))
	model, err := FindModel(root, workspace)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), ErrNoModel, err)
	}
	params, violations := CheckConstraints(model, in.Task.Constraints)
	results := filepath.Join(dir, "results")
	if err := os.MkdirAll(results, 0o755); err != nil {
		return nil, fmt.Errorf("results dir: %w", err)
	}
	specFile := filepath.Join(dir, "task.json")
	if err := writeJSONFile(specFile, in.Task); err != nil {
		return nil, fmt.Errorf("task spec: %w", err)
	}
	vars := map[string]string{"self": a.Self, "model": model, "output": results, "task": in.Task.ID, "seed": strconv.FormatInt(in.Seed, 10)}
	run := filepath.Join(dir, "run")
	if err := os.MkdirAll(run, 0o755); err != nil {
		return nil, fmt.Errorf("eval dir: %w", err)
	}
	logPath := filepath.Join(dir, "evaluator.log")
	spec := runtime.TaskSpec{
		Name: fmt.Sprintf("eval-%s-%d", runKey(in.RunID), info.Attempt), Dir: run, LogPath: logPath,
		Env:    map[string]string{"MLRB_TASK_SPEC": specFile, "MLRB_TASK": in.Task.ID},
		Labels: map[string]string{"run": in.RunID, "role": "evaluator"},
	}
	if a.Docker != nil {
		// A fresh container that never shared a filesystem with the agent:
		// the model read-only, the results writable, nothing else.
		vars["self"], vars["model"], vars["output"] = a.Containers.Self, "/model", "/results"
		spec.Image, spec.Dir = a.Containers.EvalImage, "/"
		if in.Task.Evaluation.Image != "" {
			spec.Image = in.Task.Evaluation.Image
		}
		if in.Image != "" {
			spec.Image = in.Image
		}
		spec.Env["MLRB_TASK_SPEC"] = "/mlrb-run/task.json"
		spec.Binds = []string{model + ":/model:ro", results + ":/results", specFile + ":/mlrb-run/task.json:ro"}
		spec.MemoryBytes, spec.CPUs, spec.PidsLimit = a.Containers.MemoryBytes, a.Containers.CPUs, a.Containers.PidsLimit
	}
	spec.Command = a.command(in.Task.Evaluation.Command, vars)
	cmd := spec.Command
	h, err := a.Runtime.Start(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("start evaluator %q: %w", cmd[0], err)
	}
	defer func() { _ = h.Destroy() }()
	timeout := time.NewTimer(in.Task.Evaluation.Timeout.D())
	defer timeout.Stop()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			killOnCancel(h)
			<-h.Wait()
			return nil, ctx.Err()
		case <-tick.C:
			activity.RecordHeartbeat(ctx)
		case <-timeout.C:
			killOnCancel(h)
			<-h.Wait()
			return nil, fmt.Errorf("evaluator ran past its %s timeout", in.Task.Evaluation.Timeout.D())
		case res := <-h.Wait():
			if !res.Successful() {
				return nil, fmt.Errorf("evaluator %s: %s (log: %s)", res, tail(logPath), logPath)
			}
			done = true
		}
	}
	file, err := lmeval.Find(results)
	if err != nil {
		return nil, err
	}
	r, err := lmeval.Read(file)
	if err != nil {
		return nil, err
	}
	score, metrics, err := lmeval.Score(r, in.Task.Metric)
	if err != nil {
		return nil, err
	}
	// agent-eval prints its table (parameters, tokens/s, perplexity,
	// latency) instead of writing a file: read it from the log.
	if f, err := os.Open(logPath); err == nil {
		for k, v := range lmeval.ParseAgentEvalTable(f) {
			metrics["agent_eval/"+k] = v
		}
		_ = f.Close()
	}
	a.Logger.Info("evaluated", zap.String("run", in.RunID), zap.Float64("score", score), zap.Strings("violations", violations))
	rel, _ := filepath.Rel(root, model)
	var usage *Usage
	if b, err := os.ReadFile(filepath.Join(workspace, "output", "usage.json")); err == nil {
		var u Usage
		if json.Unmarshal(b, &u) == nil {
			usage = &u
		}
	}
	return &EvalResult{Score: score, Metrics: metrics, ModelPath: filepath.ToSlash(rel), Params: params, Violations: violations, ResultsFile: file,
		Image: a.imageDigest(ctx, spec.Image), Usage: usage}, nil
}

func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 400 {
		s = "…" + s[len(s)-400:]
	}
	return s
}

// FindModel returns the model dir in a restored snapshot: the path the
// agent reported in <workdir>/output/submission.json (relative to workdir),
// else the newest directory anywhere in the snapshot holding a config.json
// (a Hugging Face model dir; MLRB's agents save under /app/<id>/, outside
// MLRB_WORKDIR). Nothing outside root is ever taken.
func FindModel(root, workdir string) (string, error) {
	var sub struct {
		ModelPath string `json:"model_path"`
	}
	if b, err := os.ReadFile(filepath.Join(workdir, "output", "submission.json")); err == nil && json.Unmarshal(b, &sub) == nil && sub.ModelPath != "" {
		p := filepath.Clean(sub.ModelPath)
		if !filepath.IsAbs(p) {
			p = filepath.Join(workdir, p)
		}
		if rel, err := filepath.Rel(root, p); err == nil && !strings.HasPrefix(rel, "..") {
			if st, err := os.Stat(p); err == nil && st.IsDir() {
				return p, nil
			}
		}
	}
	var best string
	var bestTime time.Time
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "config.json" {
			return err
		}
		st, err := d.Info()
		if err != nil {
			return err
		}
		if best == "" || st.ModTime().After(bestTime) {
			best, bestTime = filepath.Dir(p), st.ModTime()
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("search for a model: %w", err)
	}
	if best == "" {
		return "", errors.New("no model: no output/submission.json and no directory with a config.json in the workspace")
	}
	return best, nil
}

// CheckConstraints reads the model's size and dtypes from its files (the
// safetensors headers, else the config.json of a mini-task model) and
// lists every constraint it breaks.
func CheckConstraints(model string, c tasks.Constraints) (int64, []string) {
	var v []string
	params, bytes := int64(0), int64(0)
	dtypes := map[string]int64{}
	if s, err := safetensors.Summarise(model); err == nil {
		params, bytes, dtypes = s.Params, s.Bytes, s.DTypes
	} else if errors.Is(err, safetensors.ErrNoFiles) {
		var cfg struct {
			NumParameters int64  `json:"num_parameters"`
			TorchDtype    string `json:"torch_dtype"`
		}
		if b, err := os.ReadFile(filepath.Join(model, "config.json")); err == nil {
			_ = json.Unmarshal(b, &cfg)
		}
		params = cfg.NumParameters
		if cfg.TorchDtype != "" {
			dtypes[cfg.TorchDtype] = params
		}
		bytes = dirBytes(model)
	} else {
		return 0, []string{"unreadable weights: " + err.Error()}
	}
	if c.MaxParams > 0 && params > c.MaxParams {
		v = append(v, fmt.Sprintf("%d parameters exceed the limit of %d", params, c.MaxParams))
	}
	if len(c.AllowedDtypes) > 0 {
		names := make([]string, 0, len(dtypes))
		for d := range dtypes {
			names = append(names, d)
		}
		slices.Sort(names)
		for _, d := range names {
			if !slices.Contains(c.AllowedDtypes, d) {
				v = append(v, fmt.Sprintf("%d parameters are %s; allowed: %s", dtypes[d], d, strings.Join(c.AllowedDtypes, ", ")))
			}
		}
	}
	if c.MaxModelBytes > 0 && bytes > c.MaxModelBytes {
		v = append(v, fmt.Sprintf("weights take %d bytes, over the %d byte memory limit", bytes, c.MaxModelBytes))
	}
	return params, v
}

func dirBytes(dir string) int64 {
	var total int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if st, err := d.Info(); err == nil {
				total += st.Size()
			}
		}
		return nil
	})
	return total
}
