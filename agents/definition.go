// An agent's definition: its fields, checked strictly, and its hash.

// Package agents is the agent catalogue: one YAML definition per agent
// (the shipped ones embedded from this directory, the operator's in
// agents.dir), strict like the task catalogue. A definition names an
// image (or a built-in agent), the provider and model it is given, literal
// environment, secret names, arguments and an LLM budget; runs carry the
// whole definition, so a worker needs no copy of the catalogue, and each
// result records the definition's hash and the image's digest.
package agents

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"gopkg.in/yaml.v3"

	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// Definition is one agent.
type Definition struct {
	Name        string `yaml:"name" json:"name"`
	Description string `yaml:"description,omitempty" json:"description,omitempty"`
	// Image is the agent's container image (a tag or a digest); Builtin
	// names a built-in agent instead (reference, noop or idle).
	Image   string `yaml:"image,omitempty" json:"image,omitempty"`
	Builtin string `yaml:"builtin,omitempty" json:"builtin,omitempty"`
	// Provider (openai or anthropic) and Model are given to the agent as
	// PROVIDER and MLRB_MODEL; the gateway meters the calls.
	Provider string `yaml:"provider,omitempty" json:"provider,omitempty"`
	Model    string `yaml:"model,omitempty" json:"model,omitempty"`
	// Env is literal, non-secret environment; Secrets are names of values
	// in the worker's agent.env_file (agent.secret_names allows them).
	Env     map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
	Secrets []string          `yaml:"secrets,omitempty" json:"secrets,omitempty"`
	// Args replace the image's command.
	Args []string `yaml:"args,omitempty" json:"args,omitempty"`
	// LLMBudgetUSD bounds each run's LLM spend (0: the task's llm_budget).
	LLMBudgetUSD float64 `yaml:"llm_budget_usd,omitempty" json:"llm_budget_usd,omitempty"`
	// Human: a person does the task in Image (a shell image, such as
	// deploy/human.Dockerfile's) on the agents' rails: the worker's clock,
	// lease, checkpoints and evaluator. Provider and Model, when given,
	// are AI help through the run's gateway, metered against
	// llm_budget_usd; without them the person is unassisted and the
	// container reaches no gateway.
	Human bool `yaml:"human,omitempty" json:"human,omitempty"`
	// StatePaths are directories outside the workspace where the agent
	// keeps its memory (Claude Code's ~/.claude, say): checkpointed and
	// restored with the workspace, within its limits (container runtime).
	StatePaths []string `yaml:"state_paths,omitempty" json:"state_paths,omitempty"`
}

// Fields are a definition's YAML fields, for error messages.
var Fields = []string{"name", "description", "image", "builtin", "provider", "model", "env", "secrets", "args", "llm_budget_usd", "human", "state_paths"}

// Providers an agent may name.
var Providers = []string{"openai", "anthropic"}

var (
	namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	envName     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	// imagePattern is Docker's reference grammar, loosely: name[:tag][@digest].
	imagePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._/:-]*(@sha256:[0-9a-f]{64})?$|^sha256:[0-9a-f]{64}$`)
)

// Limits on what a definition carries: it travels in every run's input.
const (
	maxModel   = 200
	maxValue   = 4096
	maxEntries = 64
)

// Parse decodes one definition strictly: unknown fields, missing required
// fields and bad values are errors naming the field and the fix.
func Parse(raw []byte) (*Definition, error) {
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	var d Definition
	if err := dec.Decode(&d); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("file is empty")
		}
		return nil, fmt.Errorf("malformed: %w (fields: %s)", err, strings.Join(Fields, ", "))
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return &d, nil
}

// Validate checks a definition, from a file or a command line.
func (d *Definition) Validate() error {
	switch {
	case d.Name == "":
		return errors.New(`missing required field "name"`)
	case !namePattern.MatchString(d.Name):
		return fmt.Errorf("name %q: use lower-case letters, digits, '.', '_' and '-' (up to 63, starting with a letter or digit): it is part of every run id", d.Name)
	case d.Image == "" && d.Builtin == "":
		return fmt.Errorf(`give "image" (the agent's container image) or "builtin" (one of %s)`, strings.Join(Builtins(), ", "))
	case d.Image != "" && d.Builtin != "":
		return errors.New(`give "image" or "builtin", not both`)
	case d.Builtin != "" && builtins[d.Builtin] == nil:
		return fmt.Errorf("builtin %q: is not one of %s", d.Builtin, strings.Join(Builtins(), ", "))
	case d.Image != "" && !imagePattern.MatchString(d.Image):
		return fmt.Errorf("image %q: is not an image reference (name[:tag][@sha256:digest], lower case)", d.Image)
	case d.Builtin != "" && (d.Provider != "" || d.Model != "" || len(d.Args) > 0):
		return fmt.Errorf("builtin agent %s calls no LLM and runs a fixed command: remove provider, model and args", d.Builtin)
	case d.Human && (d.Image == "" || len(d.Args) > 0):
		return errors.New(`a human agent works in "image" (a shell image, e.g. mlrb-human built from deploy/human.Dockerfile), with no "builtin" or "args": the worker holds the container for the person`)
	case d.Human && d.Provider != "" && !slices.Contains(Providers, d.Provider):
		return fmt.Errorf("provider %q: a person's AI help is one of %s (or none: unassisted)", d.Provider, strings.Join(Providers, ", "))
	case d.Human && (d.Provider == "") != (d.Model == ""):
		return errors.New(`a human agent's AI help needs both "provider" and "model" (or neither: unassisted)`)
	case !d.Human && d.Image != "" && !slices.Contains(Providers, d.Provider):
		return fmt.Errorf("provider %q: an image agent needs one of %s (MLRB's PROVIDER)", d.Provider, strings.Join(Providers, ", "))
	case len(d.Model) > maxModel || strings.IndexFunc(d.Model, notPrintable) >= 0:
		return fmt.Errorf("model: at most %d printable characters without spaces", maxModel)
	case math.IsNaN(d.LLMBudgetUSD) || math.IsInf(d.LLMBudgetUSD, 0) || d.LLMBudgetUSD < 0:
		return errors.New("llm_budget_usd: must be a finite number of dollars, 0 or more (0: the task's llm_budget)")
	case len(d.Env) > maxEntries || len(d.Secrets) > maxEntries || len(d.Args) > maxEntries:
		return fmt.Errorf("env, secrets and args: at most %d entries each", maxEntries)
	}
	for k, v := range d.Env {
		switch {
		case !envName.MatchString(k):
			return fmt.Errorf("env: %q is not an environment variable name", k)
		case contract.Reserved(k):
			return fmt.Errorf("env: %s is set by mlrb (the contract, the gateway or the worker's own): remove it", k)
		case len(v) > maxValue:
			return fmt.Errorf("env %s: at most %d bytes", k, maxValue)
		case slices.Contains(d.Secrets, k):
			return fmt.Errorf("env %s: is also a secret: a literal value here travels through Temporal; keep it under secrets only", k)
		}
	}
	for i, s := range d.Secrets {
		if err := contract.CheckSecretName(s); err != nil {
			return fmt.Errorf("secrets[%d] %v", i, err)
		}
	}
	for i, a := range d.Args {
		if len(a) > maxValue {
			return fmt.Errorf("args[%d]: at most %d bytes", i, maxValue)
		}
	}
	return d.checkStatePaths()
}

// maxStatePaths bounds a definition's state paths.
const maxStatePaths = 8

// kernelTrees are where no agent keeps memory: the runtime's own.
var kernelTrees = []string{"/proc", "/sys", "/dev"}

// checkStatePaths: absolute, clean directories, none the root, a kernel
// tree or inside another; image agents only (a built-in agent keeps
// everything in its work dir).
func (d *Definition) checkStatePaths() error {
	if len(d.StatePaths) > 0 && d.Builtin != "" {
		return fmt.Errorf("state_paths: builtin agent %s keeps its state in its work dir; state paths are an image agent's", d.Builtin)
	}
	if len(d.StatePaths) > maxStatePaths {
		return fmt.Errorf("state_paths: at most %d", maxStatePaths)
	}
	for i, p := range d.StatePaths {
		bad := ""
		switch {
		case !path.IsAbs(p) || path.Clean(p) != p || len(p) > 256:
			bad = "is not an absolute, clean path (e.g. /root/.claude)"
		case p == "/":
			bad = "is the container's root: name the directory the agent keeps its memory in"
		case slices.ContainsFunc(kernelTrees, func(k string) bool { return p == k || strings.HasPrefix(p, k+"/") }):
			bad = "is the kernel's, not the agent's"
		}
		for j, q := range d.StatePaths {
			if bad == "" && i != j && (p == q || strings.HasPrefix(p, q+"/")) {
				bad = "is inside state_paths[" + strconv.Itoa(j) + "] " + q
			}
		}
		if bad != "" {
			return fmt.Errorf("state_paths[%d] %q %s", i, p, bad)
		}
	}
	return nil
}

func notPrintable(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) }

// Hash identifies what the agent does: every field but its description,
// as canonical JSON (map keys sorted), SHA-256. Two runs of one hash ran
// the same definition; the image's digest says which build.
func (d Definition) Hash() string {
	c := d
	c.Description = ""
	b, _ := json.Marshal(c) // a struct of strings, maps and slices: never fails
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:])
}

// Budget is a run's LLM budget: the one given for it (flags), else the
// agent's llm_budget_usd, else nil (the task's llm_budget then holds).
func (d Definition) Budget(given *llm.Budget) *llm.Budget {
	switch {
	case given != nil && given.Set():
		b := *given
		return &b
	case d.LLMBudgetUSD > 0:
		return &llm.Budget{USD: d.LLMBudgetUSD}
	}
	return nil
}

// Ref is the definition as a result records it, with the digest that ran.
func (d Definition) Ref(digest string) runs.AgentRef {
	return runs.AgentRef{Name: d.Name, Hash: d.Hash(), Image: digest, Builtin: d.Builtin, Provider: d.Provider, Model: d.Model, Human: d.Condition()}
}

// Condition is a human agent's: "unassisted", or the AI help it had
// ("assisted: openai gpt-4o, $5.00"); "" for an agent.
func (d Definition) Condition() string {
	switch {
	case !d.Human:
		return ""
	case d.Provider == "":
		return runs.Unassisted
	case d.LLMBudgetUSD > 0:
		return fmt.Sprintf("assisted: %s %s, $%.2f", d.Provider, d.Model, d.LLMBudgetUSD)
	}
	return fmt.Sprintf("assisted: %s %s", d.Provider, d.Model)
}
