// Catalog is a loaded set of specs.

package tasks

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

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
	case s.CheckpointInterval < 0:
		return fmt.Errorf("checkpoint_interval %s must be positive (or left out: the policy's checkpoint.interval)", s.CheckpointInterval.D())
	case len(s.Evaluation.Command) == 0:
		return missing("evaluation.command")
	case s.Evaluation.Timeout <= 0:
		return missing("evaluation.timeout")
	case s.Evaluation.Tolerance < 0 || math.IsNaN(s.Evaluation.Tolerance):
		return fmt.Errorf("evaluation.tolerance %v must be 0 (a deterministic evaluator: rescores agree exactly) or more", s.Evaluation.Tolerance)
	case s.Evaluation.Check != nil && !slices.ContainsFunc(s.Evaluation.Check.Command, func(a string) bool { return strings.Contains(a, "{item}") }):
		return fmt.Errorf("evaluation.check.command must name the output it checks as {item}")
	case s.Evaluation.Check != nil && s.Evaluation.Check.Timeout <= 0:
		return missing("evaluation.check.timeout")
	case s.Evaluation.Check != nil && (s.Evaluation.Check.Task == "" || s.Evaluation.Check.Field == ""):
		return missing("evaluation.check.task and evaluation.check.field")
	case s.Evaluation.Curve != nil && len(s.Evaluation.Curve.At) == 0:
		return missing("evaluation.curve.at")
	case s.Prompt == "":
		return missing("prompt")
	case s.Resources.CPUs <= 0:
		return missing("resources.cpus")
	case s.Resources.GPUCount > 0 && s.Resources.GPUType == "":
		return missing("resources.gpu_type")
	case s.LLMBudget != nil && s.LLMBudget.Check() != nil:
		return fmt.Errorf("llm_budget.%v", s.LLMBudget.Check())
	}
	if c := s.Evaluation.Curve; c != nil && c.DevArgs != nil {
		if err := c.checkDevArgs(s.Evaluation.Command); err != nil {
			return err
		}
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
	if err := s.Anchors.check(); err != nil {
		return err
	}
	if err := s.checkEvaluationInputs(); err != nil {
		return err
	}
	if err := s.Constraints.check(); err != nil {
		return err
	}
	if g := s.Granularity(); s.Evaluation.Tolerance > 0 && s.Evaluation.Tolerance < g {
		return fmt.Errorf("evaluation.tolerance %v is less than one item of the metric's smallest part (%.5f): a rescore that flips one item would disagree; make it at least that", s.Evaluation.Tolerance, g)
	}
	if s.Resources.DiskGB < 0 {
		return fmt.Errorf("resources.disk_gb %d must be 0 (agent.workspace_limit_gb) or more", s.Resources.DiskGB)
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

var (
	dataName   = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*(/[a-z0-9][a-z0-9._-]*)*$`)
	dataRef    = regexp.MustCompile(`\{data:([^}]*)\}`)
	sha256Name = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	hubRev     = regexp.MustCompile(`^[0-9a-f]{40}$`)
)

// DataRefs are the data sets an evaluation command names ({data:NAME}).
func DataRefs(command []string) []string {
	var out []string
	for _, a := range command {
		for _, m := range dataRef.FindAllStringSubmatch(a, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// checkEvaluationInputs checks the evaluator's data sets (each named in
// its command, each command reference declared) and its control.
func (s *Spec) checkEvaluationInputs() error {
	e := s.Evaluation
	declared := map[string]bool{}
	for i, d := range e.Data {
		switch {
		case !dataName.MatchString(d.Name) || strings.Contains(d.Name, ".."):
			return fmt.Errorf("evaluation.data[%d].name %q must be a relative path of lower-case names (its place under eval.data_dir)", i, d.Name)
		case declared[d.Name]:
			return fmt.Errorf("evaluation.data[%d].name %q is declared twice", i, d.Name)
		case !sha256Name.MatchString(d.SHA256):
			return fmt.Errorf("evaluation.data[%d].sha256 %q must be sha256:<64 hex> (`starter data hash PATH` prints it)", i, d.SHA256)
		case d.Source == "":
			return requiredField(fmt.Sprintf("evaluation.data[%d].source", i), "where the data set comes from and how to fetch it")
		}
		declared[d.Name] = true
	}
	used := map[string]bool{}
	commands := [][]string{e.Command}
	if e.Curve != nil {
		commands = append(commands, e.Curve.Command)
	}
	for _, c := range commands {
		for _, n := range DataRefs(c) {
			if !declared[n] {
				return fmt.Errorf("evaluation.command names {data:%s}, which evaluation.data does not declare", n)
			}
			used[n] = true
		}
	}
	for n := range declared {
		if !used[n] {
			return fmt.Errorf("evaluation.data %q is never named in evaluation.command as {data:%s}", n, n)
		}
	}
	if c := e.Control; c != nil {
		switch {
		case c.Model == "":
			return requiredField("evaluation.control.model", "a hub id, or scratch:<recipe>")
		case !strings.HasPrefix(c.Model, "scratch:") && !hubRev.MatchString(c.Revision):
			return fmt.Errorf("evaluation.control.revision %q must be the 40-hex commit of %s on the hub (a branch name moves)", c.Revision, c.Model)
		case !strings.HasPrefix(c.Path, "/"):
			return fmt.Errorf("evaluation.control.path %q must be an absolute path in the evaluator's image", c.Path)
		}
	}
	return nil
}

func requiredField(field, what string) error {
	return fmt.Errorf("missing required field %q (%s)", field, what)
}

// check checks the constraints' own fields.
func (c Constraints) check() error {
	switch c.PeakDtype {
	case "", "float32", "float16", "bfloat16":
	default:
		return fmt.Errorf("constraints.peak_dtype %q must be float32, float16, bfloat16 or left out (the saved dtype)", c.PeakDtype)
	}
	if c.PeakContext < 0 {
		return fmt.Errorf("constraints.peak_context %d must be positive", c.PeakContext)
	}
	if l := c.Lineage; l != nil {
		if l.Mode != LineageSubset && l.Mode != LineageArchitecture {
			return fmt.Errorf("constraints.lineage.mode %q must be %s or %s", l.Mode, LineageSubset, LineageArchitecture)
		}
		if len(l.From) == 0 {
			return requiredField("constraints.lineage.from", "the models the submission may derive from")
		}
		for i, m := range l.From {
			if m.Name == "" || m.Config["model_type"] == nil {
				return fmt.Errorf("constraints.lineage.from[%d] needs name and config (with its model_type)", i)
			}
		}
	}
	return nil
}
