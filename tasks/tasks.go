// A task's spec, as the catalog file states it, and its checks.

// Package tasks is the MLRB task catalog: one YAML file per task, embedded
// in the binaries, optionally extended by a directory of the user's own.
package tasks

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"text/template"
	"time"

	"github.com/mlrb/mlrb/internal/run/llm"
	"gopkg.in/yaml.v3"
)

//go:embed catalog/*.yaml
var embedded embed.FS

// Spec is one task, as the catalog file states it.
type Spec struct {
	ID            string    `yaml:"id" json:"id"`
	Title         string    `yaml:"title" json:"title"`
	Suite         string    `yaml:"suite" json:"suite"`
	Mirrors       string    `yaml:"mirrors,omitempty" json:"mirrors,omitempty"`
	Source        string    `yaml:"source" json:"source"`
	Goal          string    `yaml:"goal" json:"goal"`
	Datasets      []Dataset `yaml:"datasets" json:"datasets"`
	AllowedModels []string  `yaml:"allowed_models" json:"allowed_models"`
	Metric        Metric    `yaml:"metric" json:"metric"`
	Resources     Resources `yaml:"resources" json:"resources"`
	TimeLimit     Duration  `yaml:"time_limit" json:"time_limit"`
	// CheckpointInterval, if set, is how often the task's runs need a
	// checkpoint (its curve's marks are scored on them): a run takes the
	// shorter of it and its policy's checkpoint.interval.
	CheckpointInterval Duration    `yaml:"checkpoint_interval,omitempty" json:"checkpoint_interval,omitempty"`
	Constraints        Constraints `yaml:"constraints" json:"constraints"`
	Evaluation         Evaluation  `yaml:"evaluation" json:"evaluation"`
	Reference          *Reference  `yaml:"reference,omitempty" json:"reference,omitempty"`
	// Anchors, when set, are the baseline and top scores the leaderboard
	// measures the gap closed against.
	Anchors *Anchors `yaml:"anchors,omitempty" json:"anchors,omitempty"`
	// LLMBudget bounds a run's LLM calls through the gateway (a run may
	// set its own: starter run --llm-budget-usd).
	LLMBudget *llm.Budget `yaml:"llm_budget,omitempty" json:"llm_budget,omitempty"`
	Prompt    string      `yaml:"prompt" json:"prompt"`
}

// Dataset is data the agent may train on.
type Dataset struct {
	Name  string `yaml:"name" json:"name"`
	URI   string `yaml:"uri" json:"uri"`
	Notes string `yaml:"notes,omitempty" json:"notes,omitempty"`
}

// Metric says how the headline score is read from lm-eval style results.
type Metric struct {
	Name string `yaml:"name" json:"name"`
	// Aggregate is "single" (one part) or "mean" (unweighted mean of
	// parts); lmeval.Score computes it.
	Aggregate string       `yaml:"aggregate" json:"aggregate"`
	Parts     []MetricPart `yaml:"parts" json:"parts"`
}

// MetricPart is one lm-eval task and the result field to read.
type MetricPart struct {
	Task  string `yaml:"task" json:"task"`
	Field string `yaml:"field" json:"field"`
	// Items is how many items the part's test set has (0: not stated):
	// one item flipped moves the score by 1/Items of the part, and a
	// rescore's tolerance must hold at least that (Spec.Granularity).
	Items int `yaml:"items,omitempty" json:"items,omitempty"`
}

// Resources is the hardware a run leases.
type Resources struct {
	GPUType  string `yaml:"gpu_type" json:"gpu_type"`
	GPUCount int    `yaml:"gpu_count" json:"gpu_count"`
	CPUs     int    `yaml:"cpus" json:"cpus"`
	MemoryGB int    `yaml:"memory_gb" json:"memory_gb"`
	// DiskGB is the workspace the task promises the agent (MLRB: 500 GB);
	// it replaces agent.workspace_limit_gb for the task's runs (0: that
	// key's limit).
	DiskGB int `yaml:"disk_gb,omitempty" json:"disk_gb,omitempty"`
}

// Constraints are checked on the submitted model; zero means no limit.
// A model that breaks one is disqualified: its score never counts.
type Constraints struct {
	MaxParams int64 `yaml:"max_params" json:"max_params"`
	// MaxModelBytes bounds the weights' bytes.
	MaxModelBytes int64 `yaml:"max_model_bytes" json:"max_model_bytes"`
	// MaxPeakMemoryBytes bounds the memory of one forward pass at batch 1
	// over PeakContext tokens (2,000 when 0), the model loaded in
	// PeakDtype: weights, KV cache and activations, as the edge
	// competition's kit measured it (on the GPU by the evaluator, else
	// computed from config.json: model.PeakMemory). A model that cannot
	// take PeakContext tokens breaks the rule.
	MaxPeakMemoryBytes int64 `yaml:"max_peak_memory_bytes,omitempty" json:"max_peak_memory_bytes,omitempty"`
	PeakContext        int   `yaml:"peak_context,omitempty" json:"peak_context,omitempty"`
	// PeakDtype is the dtype the model is loaded in for the measure:
	// float32 is the kit's (a plain from_pretrained); "" is the saved
	// dtype, a deviation the task's rules must state.
	PeakDtype     string   `yaml:"peak_dtype,omitempty" json:"peak_dtype,omitempty"`
	AllowedDtypes []string `yaml:"allowed_dtypes" json:"allowed_dtypes"`
	// AllowedFamilies are the config.json model_type values the model may
	// have (empty: any): a competition's approved base-model families.
	AllowedFamilies []string `yaml:"allowed_families,omitempty" json:"allowed_families,omitempty"`
	// Reference is the model a compression task starts from.
	Reference *ReferenceModel `yaml:"reference,omitempty" json:"reference,omitempty"`
	// Lineage is the models the submission must derive from, checked on
	// its tensors' names and shapes.
	Lineage *Lineage `yaml:"lineage,omitempty" json:"lineage,omitempty"`
	Rules   []string `yaml:"rules" json:"rules"`
}

// Lineage modes.
const (
	// LineageSubset: every tensor is named as one of the model's tensors,
	// and no dimension of it is larger (pruned, never grown).
	LineageSubset = "subset"
	// LineageArchitecture: every tensor, its layer number aside, is one
	// of the model's architecture with its shape (a merge of experts,
	// layers stacked or dropped).
	LineageArchitecture = "architecture"
)

// Lineage says which models a submission must come from and how that is
// read off its tensors; a model of none of them breaks the rule.
type Lineage struct {
	Mode string         `yaml:"mode" json:"mode"`
	From []LineageModel `yaml:"from" json:"from"`
}

// LineageModel is a model the submission may derive from: its hub id and
// revision, and its config.json's shape fields, from which its tensors'
// names and shapes are derived (model.ArchTensors).
type LineageModel struct {
	Name     string         `yaml:"name" json:"name"`
	Revision string         `yaml:"revision,omitempty" json:"revision,omitempty"`
	Config   map[string]any `yaml:"config" json:"config"`
}

// ReferenceModel is the model a task starts from: the result reports the
// compression ratio against it (its parameters over the model's), and a
// model with its exact tensor names and shapes is unmodified, which
// breaks the task's rules.
type ReferenceModel struct {
	Name   string `yaml:"name" json:"name"`
	Params int64  `yaml:"params" json:"params"`
	// ShapesSHA256 is model.ShapeDigest of its weights.
	ShapesSHA256 string `yaml:"shapes_sha256" json:"shapes_sha256"`
}

// Evaluation is how the submitted model is scored. In Command, {model} is
// the model dir, {output} the results dir, {task} the task id and {seed}
// the seed; a leading {self} is the mlrb binary itself.
type Evaluation struct {
	// Command runs the evaluator. Its placeholders: {model} (the model
	// dir, read-only), {results} (the one results file the worker reads:
	// a name it chose for this evaluation, in lm-eval's shape), {outputs}
	// (a dir for outputs Check checks), {output} (a dir, for commands that
	// name no {results}: it must then hold exactly one results*.json),
	// {task}, {seed}, {self}.
	Command []string `yaml:"command" json:"command"`
	Timeout Duration `yaml:"timeout" json:"timeout"`
	// Image is this task's evaluator image under the container runtime;
	// empty means container.eval_image. Tasks differ in their harness
	// (lm-eval, the autoformalization scorer), so one task's evaluator
	// can be fixed alone.
	Image string `yaml:"image,omitempty" json:"image,omitempty"`
	// Network gives the evaluator a way out (its door, to gateway.allow,
	// as an agent's); without it the evaluator has no network at all:
	// the evaluator images run offline, and they load what an agent made.
	Network bool `yaml:"network,omitempty" json:"network,omitempty"`
	// Check, if set, checks every output the evaluator left in {outputs}
	// where running it cannot touch the score.
	Check *Check `yaml:"check,omitempty" json:"check,omitempty"`
	// Curve scores the run's checkpoints over its agent time.
	Curve *Curve `yaml:"curve,omitempty" json:"curve,omitempty"`
	// Tolerance is how far apart two evaluations of one model may score
	// and agree (`starter rescore`): 0 for an evaluator that is
	// deterministic, which must then score exactly alike; else at least
	// one item of the metric's smallest part (Granularity).
	Tolerance float64 `yaml:"tolerance,omitempty" json:"tolerance,omitempty"`
	// Data are the data sets the evaluator reads besides the model (a
	// held-out test set), each named in Command as {data:NAME}: mounted
	// read-only from the worker's eval.data_dir, and a run is refused
	// when the worker's copy is missing or is not the one hashed here.
	Data []EvalData `yaml:"data,omitempty" json:"data,omitempty"`
	// Control is the model the evaluator is known to score, shipped in
	// its image: when a run's model fails the evaluator, the control is
	// scored in the same place to tell which of the two broke.
	Control *ControlModel `yaml:"control,omitempty" json:"control,omitempty"`
}

// EvalData is one data set an evaluator reads: a file or a directory
// under the worker's eval.data_dir, at Name.
type EvalData struct {
	// Name is its path under eval.data_dir, and under /data in an
	// evaluator's container.
	Name string `yaml:"name" json:"name"`
	// SHA256 is its digest (evaldata.Digest: a file's bytes; a
	// directory's files by relative path), as "sha256:<hex>".
	SHA256 string `yaml:"sha256" json:"sha256"`
	// Source says where it comes from and how to fetch it.
	Source string `yaml:"source" json:"source"`
}

// ControlModel is a task's control: a model its evaluator scores,
// placed in the evaluator's image at build (the image's Dockerfile
// fetches Model at Revision, or builds it from scratch with a fixed
// seed), at Path there (and on a host running evaluators as processes).
type ControlModel struct {
	// Model is its hub id, or "scratch:<recipe>" for a model the image
	// builds from a fixed seed (a from-scratch baseline).
	Model    string `yaml:"model" json:"model"`
	Revision string `yaml:"revision,omitempty" json:"revision,omitempty"`
	Path     string `yaml:"path" json:"path"`
}

// Check runs each output of a model that is itself code (a Lean proof,
// whose meta code runs at compile time) in a container of its own: no
// network, no mount but the one output (read-only), nothing the worker
// reads afterwards. Its verdict is the exit status alone (0: passed),
// and the worker writes the pass rate into the results as
// results.<task>.<field>, with its standard error beside it.
type Check struct {
	// Image runs the check; empty means the evaluation's image.
	Image string `yaml:"image,omitempty" json:"image,omitempty"`
	// Command checks one output, {item} its path in the container.
	Command []string `yaml:"command" json:"command"`
	// Timeout bounds one output's check; past it, the output fails.
	Timeout Duration `yaml:"timeout" json:"timeout"`
	// Task and Field name the rate in the results (compile_rate,none).
	Task  string `yaml:"task" json:"task"`
	Field string `yaml:"field" json:"field"`
	// Parallel is how many outputs are checked at once (0: 4).
	Parallel int `yaml:"parallel,omitempty" json:"parallel,omitempty"`
}

// Reference parameterises the reference agent and evaluator on mini tasks.
type Reference struct {
	// Kind is "lm" (language modelling, scored on minimal pairs) or
	// "translate" (informal arithmetic to formal statements).
	Kind           string   `yaml:"kind" json:"kind"`
	TrainSentences int      `yaml:"train_sentences" json:"train_sentences"`
	EvalItems      int      `yaml:"eval_items" json:"eval_items"`
	Phenomena      []string `yaml:"phenomena" json:"phenomena"`
	// Start is what the agent is handed: "scratch", "base" (a pre-trained
	// model to adapt), "experts" (models to merge) or "large" (to compress).
	Start  string `yaml:"start" json:"start"`
	Trials int    `yaml:"trials" json:"trials"`
	// TrialSeconds paces each trial so that a mini run lasts long enough to
	// watch and to checkpoint; the search itself is real.
	TrialSeconds float64 `yaml:"trial_seconds" json:"trial_seconds"`
}

// Duration is a time.Duration written as "24h" in YAML and JSON.
type Duration time.Duration

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// UnmarshalYAML parses "90s", "24h".
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration (write it like 90s or 24h)", n.Line, s)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the short form.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// MarshalJSON writes the short form.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads the short form.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Hash is the spec's content hash: sha256 of its canonical JSON. A result
// carries it so a leaderboard never mixes runs of different task versions.
func (s *Spec) Hash() string {
	// The curve's marks and the checkpoint interval say when the research
	// is sampled, not how the model is scored: runs with other marks stay
	// comparable.
	// Nor does the tolerance a rescore is held to, nor the anchors (what
	// a score is measured against, not how it is made: measuring them
	// again, or naming their evaluator anew, leaves runs comparable).
	// Nor the control, which tells a broken evaluator from a model that
	// breaks it, and scores nothing of a run.
	c := *s
	c.Evaluation.Curve, c.CheckpointInterval, c.Evaluation.Tolerance, c.Anchors, c.Evaluation.Control = nil, 0, 0, nil, nil
	b, err := json.Marshal(&c)
	if err != nil {
		panic(fmt.Sprintf("tasks: spec %s does not marshal: %v", s.ID, err))
	}
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:])
}

// Interval is the checkpoint interval of the task's runs under a policy's
// interval: the shorter of the two when the task names one, but never
// shorter than floor (the least a run's budget allows its history).
func (s *Spec) Interval(policy, floor time.Duration) time.Duration {
	d := policy
	if t := s.CheckpointInterval.D(); t > 0 && (policy <= 0 || t < policy) {
		d = t
	}
	return max(d, floor)
}

// CurveSpacing is the shortest agent time between two of the curve's
// marks (or before the first) for a budget of limit; 0 without marks.
func (s *Spec) CurveSpacing(limit time.Duration) time.Duration {
	c := s.Evaluation.Curve
	if c == nil || len(c.At) == 0 {
		return 0
	}
	at := make([]float64, 0, len(c.At))
	for _, m := range c.At {
		at = append(at, m.Seconds(limit))
	}
	slices.Sort(at)
	least, prev := math.Inf(1), 0.0
	for _, x := range at {
		if x-prev > 0 {
			least = math.Min(least, x-prev)
		}
		prev = x
	}
	if math.IsInf(least, 1) {
		return 0
	}
	return time.Duration(least * float64(time.Second))
}

// NeedsGPU tells whether the task leases GPUs.
func (s *Spec) NeedsGPU() bool { return s.Resources.GPUCount > 0 }

// RenderPrompt fills the prompt template with the task's own facts and
// appends what the spec says of itself (Brief): every check that can
// disqualify the model, the rules, the data.
func (s *Spec) RenderPrompt() (string, error) {
	t, err := template.New(s.ID).Option("missingkey=error").Parse(s.Prompt)
	if err != nil {
		return "", fmt.Errorf("task %s: prompt: %w", s.ID, err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, s); err != nil {
		return "", fmt.Errorf("task %s: prompt: %w", s.ID, err)
	}
	return b.String() + s.Brief(), nil
}
