// Package tasks is the MLRB task catalog: one YAML file per task, embedded
// in the binaries, optionally extended by a directory of the user's own.
package tasks

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"text/template"
	"time"

	"gopkg.in/yaml.v3"
)

//go:embed catalog/*.yaml
var embedded embed.FS

// Spec is one task, as the catalog file states it.
type Spec struct {
	ID            string      `yaml:"id" json:"id"`
	Title         string      `yaml:"title" json:"title"`
	Suite         string      `yaml:"suite" json:"suite"`
	Mirrors       string      `yaml:"mirrors,omitempty" json:"mirrors,omitempty"`
	Source        string      `yaml:"source" json:"source"`
	Goal          string      `yaml:"goal" json:"goal"`
	Datasets      []Dataset   `yaml:"datasets" json:"datasets"`
	AllowedModels []string    `yaml:"allowed_models" json:"allowed_models"`
	Metric        Metric      `yaml:"metric" json:"metric"`
	Resources     Resources   `yaml:"resources" json:"resources"`
	TimeLimit     Duration    `yaml:"time_limit" json:"time_limit"`
	Constraints   Constraints `yaml:"constraints" json:"constraints"`
	Evaluation    Evaluation  `yaml:"evaluation" json:"evaluation"`
	Reference     *Reference  `yaml:"reference,omitempty" json:"reference,omitempty"`
	Prompt        string      `yaml:"prompt" json:"prompt"`
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
}

// Resources is the hardware a run leases.
type Resources struct {
	GPUType  string `yaml:"gpu_type" json:"gpu_type"`
	GPUCount int    `yaml:"gpu_count" json:"gpu_count"`
	CPUs     int    `yaml:"cpus" json:"cpus"`
	MemoryGB int    `yaml:"memory_gb" json:"memory_gb"`
}

// Constraints are checked on the submitted model; zero means no limit.
type Constraints struct {
	MaxParams     int64    `yaml:"max_params" json:"max_params"`
	MaxModelBytes int64    `yaml:"max_model_bytes" json:"max_model_bytes"`
	AllowedDtypes []string `yaml:"allowed_dtypes" json:"allowed_dtypes"`
	Rules         []string `yaml:"rules" json:"rules"`
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
	// (lm-eval, agent-eval), so one task's evaluator can be fixed alone.
	Image string `yaml:"image,omitempty" json:"image,omitempty"`
	// Check, if set, checks every output the evaluator left in {outputs}
	// where running it cannot touch the score.
	Check *Check `yaml:"check,omitempty" json:"check,omitempty"`
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
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("tasks: spec %s does not marshal: %v", s.ID, err))
	}
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:])
}

// NeedsGPU tells whether the task leases GPUs.
func (s *Spec) NeedsGPU() bool { return s.Resources.GPUCount > 0 }

// RenderPrompt fills the prompt template with the task's own facts.
func (s *Spec) RenderPrompt() (string, error) {
	t, err := template.New(s.ID).Option("missingkey=error").Parse(s.Prompt)
	if err != nil {
		return "", fmt.Errorf("task %s: prompt: %w", s.ID, err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, s); err != nil {
		return "", fmt.Errorf("task %s: prompt: %w", s.ID, err)
	}
	return b.String(), nil
}

// Catalog is a loaded set of specs.
type Catalog struct {
	specs map[string]*Spec
}

// UnknownTaskError names a task the catalog does not hold.
type UnknownTaskError struct {
	ID    string
	Known []string
}

func (e *UnknownTaskError) Error() string {
	return fmt.Sprintf("unknown task %q (known: %s; see `starter tasks list`)", e.ID, strings.Join(e.Known, ", "))
}

// CatalogError is a task directory or file the user gave that cannot be
// used: a bad input, not a failure.
type CatalogError struct{ Msg string }

func (e *CatalogError) Error() string { return e.Msg }

// Load reads the embedded catalog and, when dir is not empty, every *.yaml
// in dir; a file in dir replaces an embedded task of the same id.
func Load(dir string) (*Catalog, error) {
	c := &Catalog{specs: map[string]*Spec{}}
	sub, err := fs.Sub(embedded, "catalog")
	if err != nil {
		return nil, fmt.Errorf("tasks: embedded catalog: %w", err)
	}
	if err := c.addFS(sub, "embedded catalog/"); err != nil {
		return nil, err
	}
	if dir != "" {
		st, err := os.Stat(dir)
		if err != nil || !st.IsDir() {
			return nil, &CatalogError{Msg: fmt.Sprintf("tasks.dir: %q is not a readable directory", dir)}
		}
		if err := c.addFS(os.DirFS(dir), dir+string(filepath.Separator)); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *Catalog) addFS(fsys fs.FS, label string) error {
	names, err := fs.Glob(fsys, "*.yaml")
	if err != nil {
		return fmt.Errorf("tasks: list %s: %w", label, err)
	}
	for _, name := range names {
		raw, err := fs.ReadFile(fsys, name)
		if err != nil {
			return fmt.Errorf("tasks: read %s%s: %w", label, name, err)
		}
		s, err := Parse(raw)
		if err != nil {
			return &CatalogError{Msg: fmt.Sprintf("task file %s%s: %v", label, name, err)}
		}
		if want := strings.TrimSuffix(name, ".yaml"); s.ID != want {
			return &CatalogError{Msg: fmt.Sprintf("task file %s%s: id %q must match the file name (%s.yaml)", label, name, s.ID, s.ID)}
		}
		c.specs[s.ID] = s
	}
	return nil
}

var idPattern = regexp.MustCompile(`^[a-z][a-z0-9_]{1,63}$`)

// Parse decodes one task file strictly: unknown fields and missing
// required fields are errors.
func Parse(raw []byte) (*Spec, error) {
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	var s Spec
	if err := dec.Decode(&s); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("file is empty")
		}
		return nil, fmt.Errorf("malformed: %w", err)
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

func (s *Spec) validate() error {
	missing := func(field string) error { return fmt.Errorf("missing required field %q", field) }
	switch {
	case s.ID == "":
		return missing("id")
	case !idPattern.MatchString(s.ID):
		return fmt.Errorf("id %q must be lower_snake_case", s.ID)
	case s.Title == "":
		return missing("title")
	case s.Suite == "":
		return missing("suite")
	case s.Suite != "full" && s.Suite != "mini":
		return fmt.Errorf("suite %q must be full or mini", s.Suite)
	case s.Source == "":
		return missing("source")
	case s.Goal == "":
		return missing("goal")
	case len(s.Datasets) == 0:
		return missing("datasets")
	case s.Metric.Name == "":
		return missing("metric.name")
	case len(s.Metric.Parts) == 0:
		return missing("metric.parts")
	case s.TimeLimit <= 0:
		return missing("time_limit")
	case len(s.Evaluation.Command) == 0:
		return missing("evaluation.command")
	case s.Evaluation.Timeout <= 0:
		return missing("evaluation.timeout")
	case s.Evaluation.Check != nil && !slices.ContainsFunc(s.Evaluation.Check.Command, func(a string) bool { return strings.Contains(a, "{item}") }):
		return fmt.Errorf("evaluation.check.command must name the output it checks as {item}")
	case s.Evaluation.Check != nil && s.Evaluation.Check.Timeout <= 0:
		return missing("evaluation.check.timeout")
	case s.Evaluation.Check != nil && (s.Evaluation.Check.Task == "" || s.Evaluation.Check.Field == ""):
		return missing("evaluation.check.task and evaluation.check.field")
	case s.Prompt == "":
		return missing("prompt")
	case s.Resources.CPUs <= 0:
		return missing("resources.cpus")
	case s.Resources.GPUCount > 0 && s.Resources.GPUType == "":
		return missing("resources.gpu_type")
	}
	switch s.Metric.Aggregate {
	case "single":
		if len(s.Metric.Parts) != 1 {
			return fmt.Errorf("metric.aggregate single needs exactly one part, got %d", len(s.Metric.Parts))
		}
	case "mean":
	default:
		return fmt.Errorf("metric.aggregate %q must be single or mean", s.Metric.Aggregate)
	}
	for i, p := range s.Metric.Parts {
		if p.Task == "" || p.Field == "" {
			return fmt.Errorf("metric.parts[%d] needs task and field", i)
		}
	}
	for i, d := range s.Datasets {
		if d.Name == "" || d.URI == "" {
			return fmt.Errorf("datasets[%d] needs name and uri", i)
		}
	}
	if s.Suite == "mini" {
		if s.Reference == nil {
			return missing("reference")
		}
		r := s.Reference
		switch {
		case r.Kind != "lm" && r.Kind != "translate":
			return fmt.Errorf("reference.kind %q must be lm or translate", r.Kind)
		case r.TrainSentences <= 0:
			return missing("reference.train_sentences")
		case r.EvalItems <= 0:
			return missing("reference.eval_items")
		case r.Trials <= 0:
			return missing("reference.trials")
		case r.Kind == "lm" && len(r.Phenomena) == 0:
			return missing("reference.phenomena")
		}
		switch r.Start {
		case "scratch", "base", "experts", "large":
		default:
			return fmt.Errorf("reference.start %q must be scratch, base, experts or large", r.Start)
		}
	}
	if _, err := s.RenderPrompt(); err != nil {
		return err
	}
	return nil
}

// Get returns a task by id.
func (c *Catalog) Get(id string) (*Spec, error) {
	s, ok := c.specs[id]
	if !ok {
		return nil, &UnknownTaskError{ID: id, Known: c.IDs("")}
	}
	return s, nil
}

// IDs lists task ids of a suite ("" for all), sorted.
func (c *Catalog) IDs(suite string) []string {
	var ids []string
	for id, s := range c.specs {
		if suite == "" || s.Suite == suite {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}
