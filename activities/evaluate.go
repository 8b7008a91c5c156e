package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/internal/blob"
	"github.com/mlrb/mlrb/internal/contract"
	"github.com/mlrb/mlrb/internal/lmeval"
	"github.com/mlrb/mlrb/internal/runtime"
	"github.com/mlrb/mlrb/internal/safefs"
	"github.com/mlrb/mlrb/internal/safetensors"
	"github.com/mlrb/mlrb/tasks"
)

// Evaluate restores the final checkpoint into a fresh directory (never the
// agent's), finds the model, checks the task's constraints, runs the
// evaluator in the workspace (a process, or a fresh container) and reads
// its lm-eval results.
func (a *Activities) Evaluate(ctx context.Context, in EvalInput) (res *EvalResult, err error) {
	defer func(start time.Time) { a.Metrics.Evaluation(in.Task.ID, time.Since(start), err) }(time.Now())
	ctx, lv, err := a.live(ctx, in.Lease)
	if err != nil {
		return nil, err
	}
	defer lv.close()
	ev, root, err := a.prepareEvaluation(ctx, in, lv)
	if err != nil {
		return nil, err
	}
	// The evaluation's files go with it; the checkpoint stays in the store.
	defer a.removeEvaluation(ev)
	params, violations := CheckConstraints(ev.model, in.Task.Constraints)
	image := in.Task.Evaluation.Image
	if in.Image != "" {
		image = in.Image
	}
	spec := a.Workspace.EvalTask(ev, in.Task.Evaluation.Command, image)
	spec.Labels = map[string]string{runtime.LabelRun: in.RunID, runtime.LabelRole: "evaluator"}
	if in.Lease != nil {
		spec.Devices = in.Lease.Devices
	}
	lv.step(stepEvaluating, 0)
	if err := a.runEvaluator(ctx, spec, in.Task.Evaluation.Timeout.D()); err != nil {
		return nil, err
	}
	lv.step(stepReadResults, 0)
	file, err := lmeval.Find(ev.results)
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
	kept, err := a.keepResults(ctx, in.RunID, ev, file)
	if err != nil {
		return nil, err
	}
	// agent-eval prints its table (parameters, tokens/s, perplexity,
	// latency) instead of writing a file: read it from the log.
	if f, err := os.Open(ev.Log()); err == nil {
		for k, v := range lmeval.ParseAgentEvalTable(f) {
			metrics["agent_eval/"+k] = v
		}
		_ = f.Close()
	}
	a.Logger.Info("evaluated", zap.String("run", in.RunID), zap.Float64("score", score), zap.Strings("violations", violations))
	rel, _ := filepath.Rel(root.dir, ev.model)
	return &EvalResult{Score: score, Metrics: metrics, ModelPath: filepath.ToSlash(rel), Params: params, Violations: violations, ResultsFile: kept,
		Image: a.digest(ctx, spec.Image), Usage: readUsage(root)}, nil
}

// snapshot is a restored checkpoint: its root and the agent's work dir in it.
type snapshot struct{ dir, workdir string }

// prepareEvaluation restores the final checkpoint into a directory of
// its own and lays out the evaluation around the model found in it.
func (a *Activities) prepareEvaluation(ctx context.Context, in EvalInput, lv *liveness) (*evalDirs, snapshot, error) {
	lv.step(stepPreparing, 0)
	try := activity.GetInfo(ctx).Attempt
	dir := filepath.Join(a.WorkDir, "eval", runKey(in.RunID), fmt.Sprintf("try-%d", try))
	_ = os.RemoveAll(dir)
	root := snapshot{dir: filepath.Join(dir, "workspace")}
	m, err := a.Engine.Load(ctx, in.RunID, in.Final.Seq)
	if err == nil && in.Final.Attempt != 0 && m.Attempt != in.Final.Attempt {
		err = fmt.Errorf("#%d is attempt %d's, the run accepted attempt %d's", m.Seq, m.Attempt, in.Final.Attempt)
	}
	if err != nil {
		return nil, root, fmt.Errorf("final checkpoint: %w", err)
	}
	lv.step(stepRestoring, m.Bytes)
	if err := a.Engine.Restore(lv.counting(ctx), m, root.dir); err != nil {
		_ = os.RemoveAll(dir)
		return nil, root, fmt.Errorf("restore final checkpoint: %w", err)
	}
	lv.step(stepFindModel, 0)
	root.workdir = filepath.Join(root.dir, filepath.FromSlash(m.Workdir))
	model, err := FindModel(root.dir, root.workdir)
	if err == nil {
		// The evaluator reads the model dir: no link in it may lead out.
		err = safefs.CheckLinks(root.dir, model)
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, root, temporal.NewNonRetryableApplicationError(err.Error(), ErrNoModel, err)
	}
	ev := &evalDirs{name: fmt.Sprintf("eval-%s-%d", runKey(in.RunID), try), dir: dir, model: model, results: filepath.Join(dir, "results"),
		spec: filepath.Join(dir, "task.json"), task: in.Task.ID, seed: in.Seed}
	for _, d := range []string{ev.results, filepath.Join(dir, "run")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, root, fmt.Errorf("eval dir: %w", err)
		}
	}
	if err := writeJSONFile(ev.spec, in.Task); err != nil {
		return nil, root, fmt.Errorf("task spec: %w", err)
	}
	return ev, root, nil
}

// runEvaluator runs the evaluator to its end, its timeout, or the
// activity's cancellation.
func (a *Activities) runEvaluator(ctx context.Context, spec runtime.TaskSpec, timeout time.Duration) error {
	h, err := a.Workspace.Start(ctx, spec)
	if err != nil {
		return fmt.Errorf("start evaluator %q: %w", spec.Command, err)
	}
	defer func() { _ = h.Destroy() }()
	limit := time.NewTimer(timeout)
	defer limit.Stop()
	for {
		select {
		case <-ctx.Done():
			_ = h.Kill()
			<-h.Wait()
			return ctx.Err()
		case <-limit.C:
			_ = h.Kill()
			<-h.Wait()
			return fmt.Errorf("evaluator ran past its %s timeout", timeout)
		case res := <-h.Wait():
			if !res.Successful() {
				return fmt.Errorf("evaluator %s: %s (log: %s)", res, tail(spec.LogPath), spec.LogPath)
			}
			return nil
		}
	}
}

// keepResults stores the evaluator's results file in the blob store (the
// evaluation's directory goes) and returns its key.
func (a *Activities) keepResults(ctx context.Context, runID string, ev *evalDirs, file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", fmt.Errorf("results: %w", err)
	}
	defer func() { _ = f.Close() }()
	key := blob.RunPrefix(runID) + path.Join("evaluations", filepath.Base(ev.dir), filepath.Base(file))
	if err := a.Engine.Store.Put(ctx, key, f); err != nil {
		return "", fmt.Errorf("keep results: %w", err)
	}
	return key, nil
}

// removeEvaluation removes an evaluation's files, and the run's
// evaluation directory when nothing else is in it.
func (a *Activities) removeEvaluation(ev *evalDirs) {
	if err := os.RemoveAll(ev.dir); err != nil {
		a.Logger.Warn("remove the evaluation's files", zap.String("dir", ev.dir), zap.Error(err))
	}
	_ = os.Remove(filepath.Dir(ev.dir)) // only if empty
}

// readUsage reads the LLM usage the agent reported, if it did.
func readUsage(root snapshot) *contract.Usage {
	wrel, err := filepath.Rel(root.dir, root.workdir)
	if err != nil {
		return nil
	}
	b, err := safefs.ReadFile(root.dir, filepath.Join(wrel, contract.OutputDir, contract.UsageFile), maxReport)
	if err != nil {
		return nil
	}
	var u contract.Usage
	if json.Unmarshal(b, &u) != nil {
		return nil
	}
	return &u
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

// maxReport caps what is read of the small files an agent leaves for the
// worker (submission.json, usage.json, config.json).
const maxReport = 1 << 20

// FindModel returns the model dir in a restored snapshot: the path the
// agent reported in <workdir>/output/submission.json (relative to the
// work dir, or absolute in the agent's own view of the snapshot, as
// /app/<id>/model in a container), else the newest directory anywhere in
// the snapshot holding a config.json (a Hugging Face model dir; MLRB's
// agents save under /app/<id>/, outside MLRB_WORKDIR). What the agent
// left is data: a path is resolved inside root, never through a symlink,
// or refused with the reason.
func FindModel(root, workdir string) (string, error) {
	wrel, err := filepath.Rel(root, workdir)
	if err != nil {
		return "", fmt.Errorf("work dir %s is not in %s", workdir, root)
	}
	b, err := safefs.ReadFile(root, filepath.Join(wrel, contract.OutputDir, contract.SubmissionFile), maxReport)
	switch {
	case errors.Is(err, safefs.ErrRefused):
		return "", err
	case err == nil:
		var sub contract.Submission
		if json.Unmarshal(b, &sub) == nil && sub.ModelPath != "" {
			rel := filepath.Join(wrel, filepath.FromSlash(sub.ModelPath))
			if strings.HasPrefix(sub.ModelPath, "/") {
				rel = strings.TrimPrefix(filepath.Clean(filepath.FromSlash(sub.ModelPath)), string(filepath.Separator))
			}
			// A path out of the workspace is ignored (the search below
			// may find the model); one through a symlink is refused.
			p, err := safefs.Dir(root, rel)
			if errors.Is(err, safefs.ErrRefused) && !errors.Is(err, safefs.ErrOutside) {
				return "", fmt.Errorf("model_path %q: %w", sub.ModelPath, err)
			}
			if err == nil {
				return p, nil
			}
		}
	}
	var best string
	var bestTime time.Time
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || d.Name() != "config.json" {
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
		b, err := safefs.ReadFile(model, "config.json", maxReport)
		if errors.Is(err, safefs.ErrRefused) {
			return 0, []string{"unreadable config.json: " + err.Error()}
		}
		if err == nil {
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
