package model

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mlrb/mlrb/internal/scoring/safetensors"
	"github.com/mlrb/mlrb/tasks"
)

// TestLineageTablesHaveThePublishedSizes: each model a task's lineage
// names, its tensors derived from its config as transformers lays them
// out, has the parameter count its model card publishes; phi-2's table
// is the hand-written one and has the catalog's shape digest.
func TestLineageTablesHaveThePublishedSizes(t *testing.T) {
	published := map[string]int64{
		"microsoft/phi-2": 2_779_683_840, "meta-llama/Llama-2-7b-hf": 6_738_415_616, "meta-llama/Meta-Llama-3-8B": 8_030_261_248,
		"mistralai/Mistral-7B-v0.1": 7_241_732_096, "google/gemma-7b": 8_537_680_896, "google/flan-t5-small": 76_961_152,
		"google/flan-t5-base": 247_577_856, "google/flan-t5-large": 783_150_080, "google/flan-t5-xl": 2_849_757_184,
	}
	seen := map[string]bool{}
	for _, id := range []string{"edge_llm_compression", "llm_merging"} {
		for _, m := range task(t, id).Constraints.Lineage.From {
			tab, err := ArchTensors(m.Config)
			if err != nil {
				t.Fatal(err)
			}
			if got := tab.Params(); got != published[m.Name] {
				t.Errorf("%s: %d parameters derived from its config, %d published", m.Name, got, published[m.Name])
			}
			seen[m.Name] = true
		}
	}
	if len(seen) != len(published) {
		t.Errorf("lineage models %v, want %v", slices.Sorted(maps.Keys(seen)), slices.Sorted(maps.Keys(published)))
	}
	spec := task(t, "edge_llm_compression")
	tab, _ := ArchTensors(spec.Constraints.Lineage.From[0].Config)
	_, hand := phi2()
	if !maps.EqualFunc(tab.Tensors, hand, slices.Equal) {
		t.Fatal("phi-2's derived table differs from the hand-written one")
	}
	if d := ShapeDigest(asTensors(tab.Tensors)); d != spec.Constraints.Reference.ShapesSHA256 {
		t.Fatalf("phi-2's derived table has shape digest %s, the catalog says %s", d, spec.Constraints.Reference.ShapesSHA256)
	}
}

func asTensors(shapes map[string][]int64) map[string]safetensors.Tensor {
	out := map[string]safetensors.Tensor{}
	for n, s := range shapes {
		out[n] = safetensors.Tensor{Shape: s}
	}
	return out
}

// TestCompressionLineage: a model made from phi-2 by pruning or slicing
// keeps its lineage; one with a tensor phi-2 does not have, or a larger
// one, or another family's model, does not.
func TestCompressionLineage(t *testing.T) {
	cfg, ts := phi2()
	narrow := maps.Clone(ts)
	for n, s := range narrow {
		if strings.Contains(n, "mlp.fc1.") {
			narrow[n] = append([]int64{5120}, s[1:]...) // half the MLP's rows
		}
		if strings.Contains(n, "mlp.fc2.weight") {
			narrow[n] = []int64{s[0], 5120}
		}
		if strings.HasPrefix(n, "model.layers.") && !strings.HasPrefix(n, "model.layers.1") {
			delete(narrow, n) // and layers 0, 2-9, 20-31 dropped
		}
	}
	c := check(t, writeModel(t, cfg, "F16", narrow), "edge_llm_compression")
	if slices.Contains(c.Broken, tasks.CheckLineage) || slices.Contains(c.Broken, tasks.CheckUnmodified) {
		t.Fatalf("phi-2 sliced and pruned: %v", c.Violations)
	}
	grown := maps.Clone(narrow)
	grown["model.layers.10.mlp.fc1.weight"] = []int64{20480, 2560}
	grown["model.layers.10.extra.weight"] = []int64{8, 8}
	c = check(t, writeModel(t, cfg, "F16", grown), "edge_llm_compression")
	i := slices.Index(c.Broken, tasks.CheckLineage)
	if i < 0 || !strings.Contains(c.Violations[i], "model.layers.10.extra.weight is none of its tensors") || !strings.Contains(c.Violations[i], "larger than [10240 2560]") {
		t.Fatalf("a grown phi-2: %v", c.Violations)
	}
	lcfg, lts := llama3_8b()
	small := map[string][]int64{}
	for n, s := range lts {
		if !strings.HasPrefix(n, "model.layers.") || strings.HasPrefix(n, "model.layers.0.") {
			small[n] = s
		}
	}
	lcfg["num_hidden_layers"] = 1
	c = check(t, writeModel(t, lcfg, "F16", small), "edge_llm_compression")
	if !slices.Contains(c.Broken, tasks.CheckLineage) || !slices.Contains(c.Broken, tasks.CheckFamily) {
		t.Fatalf("a one-layer Llama submitted for phi-2: %v", c.Violations)
	}
}

// TestMergingLineage: a merge keeps its experts' architecture, with
// layers stacked (a passthrough merge) or dropped; a model of another
// architecture, or with a resized tensor, is none of them.
func TestMergingLineage(t *testing.T) {
	cfg, ts := llama3_8b()
	if c := check(t, writeModel(t, cfg, "BF16", ts), "llm_merging"); len(c.Violations) != 0 {
		t.Fatalf("Llama-3-8B's architecture: %v", c.Violations)
	}
	spec := task(t, "llm_merging")
	var l2 map[string]any
	for _, m := range spec.Constraints.Lineage.From {
		if m.Name == "meta-llama/Llama-2-7b-hf" {
			l2 = maps.Clone(m.Config)
		}
	}
	tab, _ := ArchTensors(l2)
	stacked := maps.Clone(tab.Tensors)
	for i := 32; i < 38; i++ {
		for n, s := range tab.Tensors {
			if strings.HasPrefix(n, "model.layers.3.") {
				stacked[strings.Replace(n, "layers.3.", fmt.Sprintf("layers.%d.", i), 1)] = s
			}
		}
	}
	l2["num_hidden_layers"] = 38
	if c := check(t, writeModel(t, l2, "F16", stacked), "llm_merging"); len(c.Violations) != 0 {
		t.Fatalf("Llama-2-7B stacked to 38 layers (%d params): %v", c.Params, c.Violations)
	}
	for _, m := range spec.Constraints.Lineage.From {
		if m.Name == "google/flan-t5-base" {
			t5, _ := ArchTensors(m.Config)
			shapes := maps.Clone(t5.Tensors)
			delete(shapes, "encoder.embed_tokens.weight") // a tied copy save_pretrained leaves out
			if c := check(t, writeModel(t, m.Config, "F32", shapes), "llm_merging"); len(c.Violations) != 0 {
				t.Fatalf("flan-t5-base: %v", c.Violations)
			}
		}
	}
	pcfg, pts := phi2()
	if c := check(t, writeModel(t, pcfg, "F16", pts), "llm_merging"); !slices.Equal(c.Broken, []string{tasks.CheckLineage}) {
		t.Fatalf("phi-2 is none of the experts: %v", c.Violations)
	}
	resized := maps.Clone(ts)
	resized["model.embed_tokens.weight"] = []int64{130000, 4096}
	if c := check(t, writeModel(t, cfg, "BF16", resized), "llm_merging"); !slices.Equal(c.Broken, []string{tasks.CheckLineage}) {
		t.Fatalf("a resized vocabulary: %v", c.Violations)
	}
}

// TestContextAndSeq2seqUnderTheMemoryRule: a model that cannot take the
// rule's 2,000 tokens (GPT-2's 1,024 positions, MLRB's own baseline
// shape) breaks a named rule instead of crashing the evaluation; a T5 is
// measured as an encoder-decoder.
func TestContextAndSeq2seqUnderTheMemoryRule(t *testing.T) {
	gpt2 := map[string]any{"model_type": "gpt2", "n_layer": 2, "n_embd": 128, "n_head": 2, "vocab_size": 50257, "n_positions": 1024}
	ts := map[string][]int64{"transformer.wte.weight": {50257, 128}, "transformer.wpe.weight": {1024, 128}}
	c := check(t, writeModel(t, gpt2, "F32", ts), "edge_llm_training")
	if !slices.Equal(c.Broken, []string{tasks.CheckContext}) || !strings.Contains(c.Violations[0], "at most 1024 positions (config.json's n_positions)") {
		t.Fatalf("GPT-2 of 1,024 positions: %v", c.Violations)
	}
	gpt2["n_positions"] = 2048
	if c := check(t, writeModel(t, gpt2, "F32", ts), "edge_llm_training"); len(c.Violations) != 0 {
		t.Fatalf("GPT-2 of 2,048 positions: %v", c.Violations)
	}
	t5 := map[string]any{"model_type": "t5", "is_encoder_decoder": true, "num_layers": 4, "num_decoder_layers": 4, "d_model": 256, "d_ff": 1024, "d_kv": 32, "num_heads": 4,
		"vocab_size": 32128, "feed_forward_proj": "gated-gelu"}
	tab, err := ArchTensors(t5)
	if err != nil {
		t.Fatal(err)
	}
	c = check(t, writeModel(t, t5, "F32", tab.Tensors), "edge_llm_training")
	if len(c.Violations) != 0 || c.Metrics["constraints/kv_cache_bytes"] != 4*4*2000*4*32*4 {
		t.Fatalf("T5: %v, KV cache %v", c.Violations, c.Metrics["constraints/kv_cache_bytes"])
	}
}

// TestEveryCheckIsInItsBrief: for each real task, a model that breaks
// every check the worker makes there; each check it names is one the
// task's brief states, in the brief's words (fidelity C2: adapters,
// remote code and dtypes disqualified without a word to the agent).
func TestEveryCheckIsInItsBrief(t *testing.T) {
	cat, err := tasks.Load("")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range cat.IDs("full") {
		spec, _ := cat.Get(id)
		brief, err := spec.RenderPrompt()
		if err != nil {
			t.Fatal(err)
		}
		stated := map[string]string{}
		for _, d := range spec.Disqualifiers() {
			stated[d.Check] = d.Text
			if !strings.Contains(brief, d.Text) {
				t.Errorf("%s: the brief leaves out %q", id, d.Text)
			}
		}
		cfg, ts := phi2()
		cfg["auto_map"] = map[string]string{"AutoModelForCausalLM": "modeling.Phi"}
		cfg["model_type"], cfg["max_position_embeddings"] = "gemma", 512
		ts["model.layers.0.extra.weight"] = []int64{1 << 20, 1 << 14} // over any size limit, and grown
		dir := writeModel(t, cfg, "I8", ts)
		writeFile(t, dir, "adapter_config.json", "{}")
		c := check(t, dir, id)
		for _, b := range c.Broken {
			if stated[b] == "" {
				t.Errorf("%s: the worker checks %s, which its brief never states", id, b)
			}
		}
		want := []string{tasks.CheckAdapter, tasks.CheckRemoteCode, tasks.CheckDtypes}
		if spec.Constraints.MaxParams > 0 {
			want = append(want, tasks.CheckParams)
		}
		if spec.Constraints.MaxPeakMemoryBytes > 0 {
			want = append(want, tasks.CheckContext)
		}
		if len(spec.Constraints.AllowedFamilies) > 0 {
			want = append(want, tasks.CheckFamily)
		}
		if spec.Constraints.Lineage != nil {
			want = append(want, tasks.CheckLineage)
		}
		for _, w := range want {
			if !slices.Contains(c.Broken, w) {
				t.Errorf("%s: the model breaks %s, the worker did not say so: %v", id, w, c.Violations)
			}
		}
	}
}

func writeFile(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
