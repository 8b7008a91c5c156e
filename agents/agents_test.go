package agents

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlrb/mlrb/internal/run/llm"
)

// TestShippedAgentsLoad: every shipped definition is valid, named by its
// file, and the paper's two MLRB agents differ only in provider and
// model, so their hashes differ.
func TestShippedAgentsLoad(t *testing.T) {
	c, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"reference", "noop", "idle", "mlrb-claude-3-5-sonnet", "mlrb-gpt-4o", "researcher-gpt-5", "researcher-claude-sonnet-4-5"} {
		if _, err := c.Get(n); err != nil {
			t.Fatal(err)
		}
	}
	a, _ := c.Get("mlrb-claude-3-5-sonnet")
	b, _ := c.Get("mlrb-gpt-4o")
	if a.Image != b.Image || a.Hash() == b.Hash() {
		t.Fatalf("same image, other models: hashes %s %s", a.Hash(), b.Hash())
	}
	// Every shipped definition that names a model has it priced: the
	// gateway refuses a call it cannot cost.
	prices, err := llm.BuiltinPrices()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Names() {
		d, _ := c.Get(n)
		if _, ok := prices.Lookup(d.Model); d.Model != "" && !ok {
			t.Errorf("agent %s names model %s, which the built-in price table (%s) does not price", d.Name, d.Model, prices.Date)
		}
	}
	var unknown *UnknownAgentError
	if _, err := c.Get("nope"); !errors.As(err, &unknown) || !strings.Contains(err.Error(), "reference") {
		t.Fatalf("unknown agent: %v", err)
	}
}

// TestHashIgnoresTheDescription: what an agent does is hashed, its prose
// is not; every other field changes it.
func TestHashIgnoresTheDescription(t *testing.T) {
	d := Definition{Name: "x", Image: "img:1", Provider: "openai", Model: "gpt-4o", Env: map[string]string{"A": "1", "B": "2"}}
	e := d
	e.Description = "changed"
	if d.Hash() != e.Hash() {
		t.Fatal("the description changed the hash")
	}
	for _, f := range []func(*Definition){
		func(x *Definition) { x.Model = "gpt-4o-mini" },
		func(x *Definition) { x.Env = map[string]string{"A": "1", "B": "3"} },
		func(x *Definition) { x.Args = []string{"/run"} },
		func(x *Definition) { x.LLMBudgetUSD = 5 },
		func(x *Definition) { x.Image = "img:2" },
	} {
		g := d
		f(&g)
		if g.Hash() == d.Hash() {
			t.Fatalf("%+v hashes as %+v", g, d)
		}
	}
}

// TestStrictDefinitions: each bad definition is refused naming its field
// and the fix; a file in agents.dir must be named by its agent.
func TestStrictDefinitions(t *testing.T) {
	cases := map[string]struct{ yaml, want string }{
		"unknown field":   {"name: x\nimage: a:1\nprovider: openai\nmodle: gpt-4o\n", "field modle not found"},
		"no name":         {"image: a:1\nprovider: openai\n", `"name"`},
		"bad name":        {"name: X/Y\nimage: a:1\nprovider: openai\n", "name \"X/Y\""},
		"neither":         {"name: x\nprovider: openai\n", `give "image"`},
		"both":            {"name: x\nimage: a:1\nbuiltin: noop\n", "not both"},
		"unknown builtin": {"name: x\nbuiltin: clever\n", "builtin \"clever\""},
		"no provider":     {"name: x\nimage: a:1\n", "provider"},
		"other provider":  {"name: x\nimage: a:1\nprovider: mistral\n", "provider \"mistral\""},
		"builtin model":   {"name: x\nbuiltin: noop\nmodel: gpt-4o\n", "remove provider, model and args"},
		"reserved env":    {"name: x\nimage: a:1\nprovider: openai\nenv: {MLRB_TASK: t}\n", "env: MLRB_TASK is set by mlrb"},
		"gateway env":     {"name: x\nimage: a:1\nprovider: openai\nenv: {OPENAI_BASE_URL: http://x}\n", "env: OPENAI_BASE_URL"},
		"env as secret":   {"name: x\nimage: a:1\nprovider: openai\nenv: {HF: t}\nsecrets: [HF]\n", "also a secret"},
		"secret of ours":  {"name: x\nimage: a:1\nprovider: openai\nsecrets: [AWS_SECRET_ACCESS_KEY]\n", "secrets[0]"},
		"provider key":    {"name: x\nimage: a:1\nprovider: openai\nsecrets: [OPENAI_API_KEY]\n", "secrets[0]"},
		"negative budget": {"name: x\nimage: a:1\nprovider: openai\nllm_budget_usd: -1\n", "llm_budget_usd"},
		"bad image":       {"name: x\nimage: 'A B'\nprovider: openai\n", "image \"A B\""},
		"model spaces":    {"name: x\nimage: a:1\nprovider: openai\nmodel: 'gpt 4o'\n", "model:"},
		"empty":           {"", "empty"},
		"state relative":  {"name: x\nimage: a:1\nprovider: openai\nstate_paths: [.claude]\n", `state_paths[0] ".claude" is not an absolute, clean path`},
		"state root":      {"name: x\nimage: a:1\nprovider: openai\nstate_paths: [/]\n", "is the container's root"},
		"state kernel":    {"name: x\nimage: a:1\nprovider: openai\nstate_paths: [/proc/x]\n", "is the kernel's"},
		"state nested":    {"name: x\nimage: a:1\nprovider: openai\nstate_paths: [/root/.claude, /root/.claude/projects]\n", "inside state_paths[0]"},
		"state builtin":   {"name: x\nbuiltin: noop\nstate_paths: [/root/.claude]\n", "keeps its state in its work dir"},
		"researcher":      {"name: x\nbuiltin: researcher\nprovider: openai\nmodel: gpt-4o\n", `builtin "researcher": is not one of`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := Parse([]byte(c.yaml)); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one naming %q", err, c.want)
			}
		})
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "mine.yaml"), []byte("name: yours\nimage: a:1\nprovider: openai\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var ce *CatalogError
	if _, err := Load(dir); !errors.As(err, &ce) || !strings.Contains(err.Error(), "mine.yaml") || !strings.Contains(err.Error(), "must match the file name") {
		t.Fatalf("misnamed file: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing")); !errors.As(err, &ce) || !strings.Contains(err.Error(), "agents.dir") {
		t.Fatalf("missing dir: %v", err)
	}
}

// TestOperatorAgentsOverride: a file in agents.dir adds an agent, or
// replaces a shipped one of its name.
func TestOperatorAgentsOverride(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"mine.yaml":        "name: mine\nimage: mine:1\nprovider: anthropic\nmodel: claude-3-5-haiku-20241022\nargs: [/agent, --fast]\nllm_budget_usd: 2.5\n",
		"mlrb-gpt-4o.yaml": "name: mlrb-gpt-4o\nimage: mlrb-agent:v2\nprovider: openai\nmodel: gpt-4o\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := c.Get("mine")
	if strings.Join(m.Command(), " ") != "/agent --fast" || m.LLMBudgetUSD != 2.5 || c.Source("mine") != filepath.Join(dir, "mine.yaml") {
		t.Fatalf("mine: %+v from %s", m, c.Source("mine"))
	}
	if g, _ := c.Get("mlrb-gpt-4o"); g.Image != "mlrb-agent:v2" {
		t.Fatalf("override: %+v", g)
	}
	if err := (Definition{Name: "noop", Builtin: "noop"}).CheckTask("baby_lm", false); err == nil {
		t.Fatal("a built-in agent on a full task")
	}
}
