package deploy

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlrb/mlrb/internal/testkit/testenv"
	"github.com/mlrb/mlrb/tasks"
)

// fakeLean is a lean that keeps the file it was asked to compile and
// answers what the test says.
const fakeLean = `#!/bin/sh
cp "$2" "$FAKE_LEAN_SAW"
printf '%s' "$FAKE_LEAN_SAYS"
exit "${FAKE_LEAN_EXIT:-0}"
`

// leanCheck runs mlrb-lean-check on output with the fake lean; it
// returns the exit status and the file lean compiled ("" when it never
// ran).
func leanCheck(t *testing.T, output, leanSays string, leanExit string) (int, string) {
	t.Helper()
	dir := t.TempDir()
	bin, project := filepath.Join(dir, "bin"), filepath.Join(dir, "project")
	for _, d := range []string{bin, filepath.Join(project, "src")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(bin, "lean"), []byte(fakeLean), 0o755); err != nil {
		t.Fatal(err)
	}
	item := filepath.Join(dir, "00000.lean")
	if err := os.WriteFile(item, []byte(output), 0o444); err != nil {
		t.Fatal(err)
	}
	saw := filepath.Join(dir, "saw.lean")
	cmd := exec.Command("sh", filepath.Join("autoformalization", "mlrb-lean-check"), item)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "MLRB_LEAN_PROJECT="+project, "FAKE_LEAN_SAW="+saw,
		"FAKE_LEAN_SAYS="+leanSays, "FAKE_LEAN_EXIT="+leanExit)
	_ = cmd.Run()
	compiled, _ := os.ReadFile(saw)
	return cmd.ProcessState.ExitCode(), string(compiled)
}

// header is what the evaluator writes before each output.
const header = "import tactic\nimport data.real.basic\n\n"

// TestLeanCheckCountsOnlyProofs: an empty output, one with no
// declaration, one with sorry or admit, an axiom or a constant, and one
// stating only true prove nothing and fail without a compile; Lean's "uses sorry" warning (exit 0) fails too; an
// output's own imports move to the top, once each.
func TestLeanCheckCountsOnlyProofs(t *testing.T) {
	proof := "theorem two_eq : (2:ℕ) = 1 + 1 := by norm_num\n"
	cases := []struct {
		name, output, leanSays, leanExit string
		want                             int
		compiled                         bool
	}{
		{"empty", header + "\n", "", "0", 1, false},
		{"whitespace", header + "   \n\t\n", "", "0", 1, false},
		{"no declaration", header + "def f := 1\n", "", "0", 1, false},
		{"sorry", header + "theorem t : 1 = 1 := sorry\n", "", "0", 1, false},
		{"admit", header + "lemma t : 1 = 1 := begin admit end\n", "", "0", 1, false},
		{"sorry warning", header + proof, "src/mlrb_item.lean:1:8: warning: declaration 'two_eq' uses sorry", "0", 1, true},
		{"error", header + proof, "src/mlrb_item.lean:1:0: error: unknown identifier", "0", 1, true},
		{"lean fails", header + proof, "", "1", 1, true},
		{"a proof", header + proof, "", "0", 0, true},
		{"a name holding sorry", header + "theorem not_sorry_here : (1:ℕ) = 1 := rfl\n", "", "0", 0, true},
		// Audit N11: an axiom proves whatever it states; true proves nothing.
		{"an axiom", header + "axiom h : false\ntheorem t : (1:ℕ) = 2 := false.elim h\n", "", "0", 1, false},
		{"a constant", header + "constant c : (1:ℕ) = 2\ntheorem t : (1:ℕ) = 2 := c\n", "", "0", 1, false},
		{"only true", header + "theorem t : true := trivial\n", "", "0", 1, false},
		// Audit L5: the same behind attributes, meta code or a line break.
		{"an axiom behind an attribute", header + "@[simp] axiom h : false\ntheorem t : (1:ℕ) = 2 := false.elim h\n", "", "0", 1, false},
		{"an axiom from meta code", header + "run_cmd tactic.add_decl (declaration.ax `h [] `(false))\ntheorem t : (1:ℕ) = 2 := sorry_free\n", "", "0", 1, false},
		{"only true over two lines", header + "theorem t :\n  true := trivial\n", "", "0", 1, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, compiled := leanCheck(t, c.output, c.leanSays, c.leanExit)
			if code != c.want || (compiled != "") != c.compiled {
				t.Fatalf("exit %d (want %d), compiled %q", code, c.want, compiled)
			}
		})
	}
	code, compiled := leanCheck(t, header+"import data.nat.basic\nimport tactic\n"+proof, "", "0")
	want := "import tactic\nimport data.real.basic\nimport data.nat.basic\n\n" + proof
	if code != 0 || compiled != want {
		t.Fatalf("imports in the output: exit %d, compiled\n%s\nwant\n%s", code, compiled, want)
	}
}

// python runs code with the evaluator's functions in scope (none of them
// needs torch) and returns what it prints.
func python(t *testing.T, code string) string {
	t.Helper()
	py := testenv.Tool(t, "python3", "apt-get install python3")
	script, _ := filepath.Abs(filepath.Join("autoformalization", "mlrb-eval-autoformalization"))
	prog := "import runpy\nm = runpy.run_path(" + jsonString(script) + ", run_name='mlrb')\n" + code
	out, err := exec.Command(py, "-c", prog).CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestAutoformalizationEvaluator: an encoder-decoder (the paper's GPT-4o
// agent fine-tuned Flan-T5) is loaded as one; MLRB's item fields map to
// the prompt as the task's prompt says; a held-out item from MLRB's
// public train split is refused.
func TestAutoformalizationEvaluator(t *testing.T) {
	dir := t.TempDir()
	t5, llama := filepath.Join(dir, "t5"), filepath.Join(dir, "llama")
	for d, cfg := range map[string]string{t5: `{"model_type": "t5", "is_encoder_decoder": true}`, llama: `{"model_type": "llama"}`} {
		_ = os.MkdirAll(d, 0o755)
		if err := os.WriteFile(filepath.Join(d, "config.json"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := python(t, "print(m['model_kind']("+jsonString(t5)+"), m['model_kind']("+jsonString(llama)+"))"); got != "seq2seq causal" {
		t.Fatalf("model kinds: %s", got)
	}
	data := filepath.Join(dir, "heldout.jsonl")
	items := `{"name": "a", "informal_statement": "Show 2 = 1 + 1.", "informal_proof": "Compute.", "formal_proof": "theorem a : (2:ℕ) = 1 + 1 := by norm_num"}
{"informal": "Show 0 < 1.", "formal": "theorem b : (0:ℕ) < 1 := by norm_num"}
`
	if err := os.WriteFile(data, []byte(items), 0o644); err != nil {
		t.Fatal(err)
	}
	got := python(t, "import json\nprint(json.dumps(m['load_items']("+jsonString(data)+")))")
	if !strings.Contains(got, `"informal": "Show 2 = 1 + 1.\nCompute."`) || !strings.Contains(got, `"formal": "theorem b : (0:\u2115) < 1 := by norm_num"`) {
		t.Fatalf("items: %s", got)
	}
	hashes := filepath.Join(dir, "train_hashes.txt")
	train := python(t, "print(m['item_hash']('theorem  b : (0:ℕ) < 1\\n := by norm_num'))")
	if err := os.WriteFile(hashes, []byte(train+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := python(t, "print(m['train_overlap'](m['load_items']("+jsonString(data)+"), "+jsonString(hashes)+"))"); got != "[1]" {
		t.Fatalf("overlap with the train split: %s (want item 1, whitespace aside)", got)
	}
	// ProofNet's test split, the held-out set: its informal statement and
	// proof, and its formal statement (up to ":="), which an output's own
	// statement is compared with.
	proofnet := filepath.Join(dir, "proofnet.jsonl")
	line := `{"id": "Rudin|exercise_1_1b", "formal_statement": "theorem exercise_1_1b\n(x : \u211d)\n(y : \u211a)\n(h : y \u2260 0)\n: ( irrational x ) -> irrational ( x * y ) :=", "src_header": "import .common\n", "nl_statement": "If $r$ is rational and $x$ is irrational, prove that $rx$ is irrational.", "nl_proof": "\\begin{proof}\nIf $rx$ were rational, so would $x$ be.\n\\end{proof}"}` + "\n"
	if err := os.WriteFile(proofnet, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	got = python(t, "import json\nit = m['load_items']("+jsonString(proofnet)+")[0]\n"+
		"print(json.dumps([it['statement_only'], it['informal'].startswith('If $r$ is rational'), '\\\\begin{proof}' in it['informal'], it['formal'].endswith(':=')]))\n"+
		"print(m['statement_of']('theorem t (x : ℕ) : x = x := rfl'))\nprint(m['statement_of']('no statement'))")
	if got != "[true, true, true, true]\ntheorem t (x : ℕ) : x = x :=\nno statement" {
		t.Fatalf("ProofNet items: %s", got)
	}
}

// TestMathReasoningPromptQuotesTheTemplate: the agent is told the exact
// template its model is prompted with, and how MLRB's fields fill it.
func TestMathReasoningPromptQuotesTheTemplate(t *testing.T) {
	cat, err := tasks.Load("")
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := cat.Get("math_reasoning")
	prompt, err := spec.RenderPrompt()
	if err != nil {
		t.Fatal(err)
	}
	template := python(t, "import json\nprint(json.dumps(m['PROMPT']))")
	var tmpl string
	if err := json.Unmarshal([]byte(template), &tmpl); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(prompt, tmpl) || !strings.Contains(prompt, "informal_statement") || !strings.Contains(prompt, "formal_proof") {
		t.Fatalf("the task's prompt does not quote the evaluator's template %q and its fields:\n%s", tmpl, prompt)
	}
}
