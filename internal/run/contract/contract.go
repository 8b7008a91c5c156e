// The agent contract: the MLRB_* environment, the files behind it (the deadline file written here), submission.json and usage.json.

// Package contract is the agent contract in one place: what mlrb tells an
// agent (the MLRB_* environment and the files behind it, plus the
// variables MLRB's own harness sets) and what an agent leaves for
// evaluation (output/submission.json, output/usage.json). The agent
// activity builds it with Environ, the reference agent reads it with
// FromEnv, and the evaluation reads the files through the names here.
package contract

import (
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Splits an evaluator scores a model on (its --split): the held-out test
// split (a run's final evaluation) or a dev split the task names for a
// run's curve.
const (
	SplitTest = "test"
	SplitDev  = "dev"
)

// Variables an agent gets.
const (
	EnvTask          = "MLRB_TASK"
	EnvSeed          = "MLRB_SEED"
	EnvWorkdir       = "MLRB_WORKDIR"
	EnvOutputDir     = "MLRB_OUTPUT_DIR"
	EnvDeadline      = "MLRB_DEADLINE"
	EnvDeadlineFile  = "MLRB_DEADLINE_FILE"
	EnvTimeRemaining = "MLRB_TIME_REMAINING_SECONDS"
	EnvAttempt       = "MLRB_ATTEMPT"
	EnvResumed       = "MLRB_RESUMED"
	EnvTaskSpec      = "MLRB_TASK_SPEC"
	EnvPromptFile    = "MLRB_PROMPT_FILE"
	// EnvModel is the model the agent's definition names (its provider is
	// PROVIDER, as MLRB's harness sets it).
	EnvModel = "MLRB_MODEL"
	// EnvLLMBudget is the run's LLM budget in dollars (unset: none), so an
	// agent can pace its calls; the gateway enforces it.
	EnvLLMBudget = "MLRB_LLM_BUDGET_USD"
	// What MLRB's run.sh sets, for agent images written against it.
	EnvHarnessTask      = "TASK_NAME"
	EnvHarnessBenchmark = "BENCHMARK"
	EnvHarnessProvider  = "PROVIDER"
)

// Files of the contract, relative to the work dir or the control dir.
const (
	OutputDir      = "output"
	SubmissionFile = "submission.json" // in OutputDir
	UsageFile      = "usage.json"      // in OutputDir
	DeadlineFile   = "deadline"        // in the control dir
)

// Env is what an agent is told.
type Env struct {
	Task    string
	Seed    int64
	Workdir string
	// Deadline is the deadline at start; DeadlineFile holds the current
	// one (an operator's extension rewrites it while the agent runs).
	Deadline      time.Time
	DeadlineFile  string
	TimeRemaining time.Duration
	Attempt       int
	Resumed       bool
	// ResumeFile is the resume note of a resumed attempt ("": none).
	ResumeFile string
	TaskSpec   string
	PromptFile string
	// Suite and Provider fill MLRB's BENCHMARK and PROVIDER; Model is the
	// agent definition's model, if it names one.
	Suite    string
	Provider string
	Model    string
	// LLMBudgetUSD is the run's LLM budget (0: none).
	LLMBudgetUSD float64
}

// OutputDir is where the agent leaves its model and reports.
func (e Env) OutputDir() string { return path.Join(filepath.ToSlash(e.Workdir), OutputDir) }

// Environ is the environment that tells an agent e.
func (e Env) Environ() map[string]string {
	resumed, bench := "0", "full_benchmark"
	if e.Resumed {
		resumed = "1"
	}
	if e.Suite == "mini" {
		bench = "mini_benchmark"
	}
	env := map[string]string{
		EnvTask: e.Task, EnvSeed: strconv.FormatInt(e.Seed, 10),
		EnvWorkdir: e.Workdir, EnvOutputDir: e.OutputDir(),
		EnvDeadline:      e.Deadline.UTC().Format(time.RFC3339Nano),
		EnvDeadlineFile:  e.DeadlineFile,
		EnvTimeRemaining: strconv.Itoa(int(e.TimeRemaining.Seconds())),
		EnvAttempt:       strconv.Itoa(e.Attempt),
		EnvResumed:       resumed,
		EnvTaskSpec:      e.TaskSpec,
		EnvPromptFile:    e.PromptFile,
		EnvHarnessTask:   e.Task, EnvHarnessBenchmark: bench, EnvHarnessProvider: e.Provider,
		EnvModel: e.Model,
	}
	if e.ResumeFile != "" {
		env[EnvResumeFile] = e.ResumeFile
	}
	if e.LLMBudgetUSD > 0 {
		env[EnvLLMBudget] = strconv.FormatFloat(e.LLMBudgetUSD, 'f', -1, 64)
	}
	return env
}

// Reserved tells whether an agent definition may not set name as a
// literal variable: the contract's own, the gateway's, the door's proxy
// and the worker's reserved prefixes.
func Reserved(name string) bool {
	upper := strings.ToUpper(name)
	switch upper {
	case EnvHarnessTask, EnvHarnessBenchmark, EnvHarnessProvider, "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "ALL_PROXY",
		"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "PATH", "HOME":
		return true
	}
	if slices.Contains(GatewayNames, upper) {
		return true
	}
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(upper, p) {
			return true
		}
	}
	return false
}

// FromEnv reads the contract through getenv (os.Getenv for a real agent).
func FromEnv(getenv func(string) string) (Env, error) {
	var e Env
	need := func(k string) (string, error) {
		v := getenv(k)
		if v == "" {
			return "", fmt.Errorf("%s is not set: the agent runs under the mlrb agent contract", k)
		}
		return v, nil
	}
	var err error
	var s string
	if e.Task, err = need(EnvTask); err != nil {
		return e, err
	}
	if s, err = need(EnvSeed); err != nil {
		return e, err
	}
	if e.Seed, err = strconv.ParseInt(s, 10, 64); err != nil || e.Seed < 0 {
		return e, fmt.Errorf("%s: %q is not a seed", EnvSeed, s)
	}
	if e.Workdir, err = need(EnvWorkdir); err != nil {
		return e, err
	}
	if out, err := need(EnvOutputDir); err != nil {
		return e, err
	} else if out != e.OutputDir() {
		return e, fmt.Errorf("%s: %q is not %s/%s", EnvOutputDir, out, e.Workdir, OutputDir)
	}
	if s, err = need(EnvDeadline); err != nil {
		return e, err
	}
	if e.Deadline, err = time.Parse(time.RFC3339Nano, s); err != nil {
		return e, fmt.Errorf("%s: %q is not RFC 3339", EnvDeadline, s)
	}
	e.DeadlineFile = getenv(EnvDeadlineFile)
	if s := getenv(EnvTimeRemaining); s != "" {
		n, _ := strconv.Atoi(s)
		e.TimeRemaining = time.Duration(n) * time.Second
	}
	e.Attempt, _ = strconv.Atoi(getenv(EnvAttempt))
	e.Resumed = getenv(EnvResumed) == "1"
	e.ResumeFile = getenv(EnvResumeFile)
	e.TaskSpec, e.PromptFile = getenv(EnvTaskSpec), getenv(EnvPromptFile)
	e.Provider, e.Model = getenv(EnvHarnessProvider), getenv(EnvModel)
	if s := getenv(EnvLLMBudget); s != "" {
		if e.LLMBudgetUSD, err = strconv.ParseFloat(s, 64); err != nil || e.LLMBudgetUSD < 0 {
			return e, fmt.Errorf("%s: %q is not a budget in dollars", EnvLLMBudget, s)
		}
	}
	if getenv(EnvHarnessBenchmark) == "mini_benchmark" {
		e.Suite = "mini"
	}
	return e, nil
}

// CurrentDeadline is the deadline now: the deadline file's when it is
// readable, else the one given at start.
func (e Env) CurrentDeadline() time.Time {
	if e.DeadlineFile == "" {
		return e.Deadline
	}
	b, err := os.ReadFile(e.DeadlineFile)
	if err != nil {
		return e.Deadline
	}
	d, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(b)))
	if err != nil {
		return e.Deadline
	}
	return d
}

// WriteDeadline replaces the deadline file in dir atomically, so an agent
// never reads half a timestamp.
func WriteDeadline(dir string, d time.Time) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("control dir: %w", err)
	}
	tmp := filepath.Join(dir, "."+DeadlineFile+".tmp")
	if err := os.WriteFile(tmp, []byte(d.UTC().Format(time.RFC3339Nano)+"\n"), 0o644); err != nil {
		return fmt.Errorf("deadline file: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, DeadlineFile)); err != nil {
		return fmt.Errorf("deadline file: %w", err)
	}
	return nil
}

// Submission is output/submission.json: where the agent put its model,
// relative to its work dir.
type Submission struct {
	ModelPath string `json:"model_path"`
}

// SelfReport is output/usage.json: the LLM usage the agent reports.
type SelfReport struct {
	InputTokens  *int64   `json:"input_tokens"`
	OutputTokens *int64   `json:"output_tokens"`
	CostUSD      *float64 `json:"cost_usd"`
}

// Bounds of a run's reported usage: far above any real 24-hour run (the
// paper's runs cost about $43), low enough that no sum of runs overflows.
const (
	MaxUsageTokens  = int64(1e13)
	MaxUsageCostUSD = 1e7
)

// Check refuses usage that is not a run's: negative, not finite, or past
// the bounds. The agent writes this file, so nothing in it is trusted.
func (u *SelfReport) Check() error {
	for name, n := range map[string]*int64{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens} {
		if n != nil && (*n < 0 || *n > MaxUsageTokens) {
			return fmt.Errorf("%s: %d is not a token count (0 to %d)", name, *n, MaxUsageTokens)
		}
	}
	if c := u.CostUSD; c != nil && (math.IsNaN(*c) || *c < 0 || *c > MaxUsageCostUSD) {
		return fmt.Errorf("cost_usd: %g is not a run's cost (0 to %g)", *c, MaxUsageCostUSD)
	}
	return nil
}
