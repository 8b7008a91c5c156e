// A model's lineage: its tensors against the architecture's table.

package model

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/mlrb/mlrb/internal/scoring/safetensors"
	"github.com/mlrb/mlrb/tasks"
)

// Table is an architecture's tensors as transformers saves them: name →
// shape. Aliases are the names of tied copies (T5's encoder and decoder
// embeddings are its shared one) that a checkpoint may hold or leave out.
type Table struct {
	Tensors map[string][]int64
	Aliases map[string]bool
}

// Params counts the table's parameters, its aliases aside.
func (t Table) Params() int64 {
	var n int64
	for name, shape := range t.Tensors {
		if t.Aliases[name] {
			continue
		}
		e := int64(1)
		for _, d := range shape {
			e *= d
		}
		n += e
	}
	return n
}

// ArchTensors derives the tensors of a model from its config.json's
// shape fields, for the families a lineage rule names: phi (PhiForCausalLM),
// llama and mistral (LlamaForCausalLM's layout), gemma, and t5
// (T5ForConditionalGeneration). bench/gpu holds each against the
// state_dict transformers builds from the same config.
func ArchTensors(config map[string]any) (Table, error) {
	b, err := json.Marshal(config)
	if err != nil {
		return Table{}, fmt.Errorf("lineage config: %w", err)
	}
	a, err := ParseArch(b)
	if err != nil {
		return Table{}, err
	}
	// As config.json reads: numbers are float64 whatever decoded them.
	config = map[string]any{}
	_ = json.Unmarshal(b, &config)
	tied, _ := config["tie_word_embeddings"].(bool)
	t := Table{Tensors: map[string][]int64{}, Aliases: map[string]bool{}}
	put := func(name string, shape ...int64) { t.Tensors[name] = shape }
	q, kv := a.Heads*a.HeadDim, a.KVHeads*a.HeadDim
	switch strings.ToLower(a.ModelType) {
	case "phi":
		put("model.embed_tokens.weight", a.Vocab, a.Hidden)
		put("model.final_layernorm.weight", a.Hidden)
		put("model.final_layernorm.bias", a.Hidden)
		put("lm_head.weight", a.Vocab, a.Hidden)
		put("lm_head.bias", a.Vocab)
		for i := range a.Layers {
			p := fmt.Sprintf("model.layers.%d.", i)
			for name, out := range map[string]int64{"q_proj": q, "k_proj": kv, "v_proj": kv} {
				put(p+"self_attn."+name+".weight", out, a.Hidden)
				put(p+"self_attn."+name+".bias", out)
			}
			put(p+"self_attn.dense.weight", a.Hidden, q)
			put(p+"self_attn.dense.bias", a.Hidden)
			put(p+"mlp.fc1.weight", a.Intermediate, a.Hidden)
			put(p+"mlp.fc1.bias", a.Intermediate)
			put(p+"mlp.fc2.weight", a.Hidden, a.Intermediate)
			put(p+"mlp.fc2.bias", a.Hidden)
			put(p+"input_layernorm.weight", a.Hidden)
			put(p+"input_layernorm.bias", a.Hidden)
		}
	case "llama", "mistral", "gemma":
		put("model.embed_tokens.weight", a.Vocab, a.Hidden)
		put("model.norm.weight", a.Hidden)
		if _, set := config["tie_word_embeddings"]; !set {
			tied = a.ModelType == "gemma"
		}
		if !tied {
			put("lm_head.weight", a.Vocab, a.Hidden)
		}
		for i := range a.Layers {
			p := fmt.Sprintf("model.layers.%d.", i)
			put(p+"self_attn.q_proj.weight", q, a.Hidden)
			put(p+"self_attn.k_proj.weight", kv, a.Hidden)
			put(p+"self_attn.v_proj.weight", kv, a.Hidden)
			put(p+"self_attn.o_proj.weight", a.Hidden, q)
			put(p+"mlp.gate_proj.weight", a.Intermediate, a.Hidden)
			put(p+"mlp.up_proj.weight", a.Intermediate, a.Hidden)
			put(p+"mlp.down_proj.weight", a.Hidden, a.Intermediate)
			put(p+"input_layernorm.weight", a.Hidden)
			put(p+"post_attention_layernorm.weight", a.Hidden)
		}
	case "t5":
		t5Tensors(t, a, config, tied)
	default:
		return Table{}, fmt.Errorf("lineage: no tensor layout for model_type %q (phi, llama, mistral, gemma, t5)", a.ModelType)
	}
	return t, nil
}

// t5Tensors lays out T5ForConditionalGeneration: gated feed-forwards
// (wi_0, wi_1) under feed_forward_proj gated-*, relative position biases
// in each stack's first block, and an untied head unless tied.
func t5Tensors(t Table, a *Arch, config map[string]any, tied bool) {
	put := func(name string, shape ...int64) { t.Tensors[name] = shape }
	buckets := int64(32)
	if v, ok := config["relative_attention_num_buckets"].(float64); ok {
		buckets = int64(v)
	}
	gated := strings.HasPrefix(fmt.Sprint(config["feed_forward_proj"]), "gated-")
	inner := a.Heads * a.HeadDim
	put("shared.weight", a.Vocab, a.Hidden)
	for _, stack := range []string{"encoder", "decoder"} {
		put(stack+".embed_tokens.weight", a.Vocab, a.Hidden)
		t.Aliases[stack+".embed_tokens.weight"] = true
		put(stack+".final_layer_norm.weight", a.Hidden)
		layers, sub := a.Layers, []string{"SelfAttention"}
		if stack == "decoder" {
			sub = []string{"SelfAttention", "EncDecAttention"}
			if v, ok := config["num_decoder_layers"].(float64); ok && v > 0 {
				layers = int64(v)
			}
		}
		for i := range layers {
			p := fmt.Sprintf("%s.block.%d.layer.", stack, i)
			for j, att := range sub {
				for _, m := range []string{"q", "k", "v"} {
					put(fmt.Sprintf("%s%d.%s.%s.weight", p, j, att, m), inner, a.Hidden)
				}
				put(fmt.Sprintf("%s%d.%s.o.weight", p, j, att), a.Hidden, inner)
				put(fmt.Sprintf("%s%d.layer_norm.weight", p, j), a.Hidden)
				if i == 0 && att == "SelfAttention" {
					put(fmt.Sprintf("%s%d.SelfAttention.relative_attention_bias.weight", p, j), buckets, a.Heads)
				}
			}
			ff := fmt.Sprintf("%s%d.", p, len(sub))
			if gated {
				put(ff+"DenseReluDense.wi_0.weight", a.Intermediate, a.Hidden)
				put(ff+"DenseReluDense.wi_1.weight", a.Intermediate, a.Hidden)
			} else {
				put(ff+"DenseReluDense.wi.weight", a.Intermediate, a.Hidden)
			}
			put(ff+"DenseReluDense.wo.weight", a.Hidden, a.Intermediate)
			put(ff+"layer_norm.weight", a.Hidden)
		}
	}
	if !tied {
		put("lm_head.weight", a.Vocab, a.Hidden)
	}
}

// layerIndex is a tensor name's layer number (after layers., h. or
// block.): what a merge that stacks or drops layers changes.
var layerIndex = regexp.MustCompile(`(^|\.)(layers|h|block)\.\d+\.`)

func withoutLayer(name string) string { return layerIndex.ReplaceAllString(name, "$1$2.*.") }

// lineage checks the model's tensors against the models the task lets
// it derive from: it must fit one of them.
func (c *Check) lineage(rules tasks.Constraints, s *safetensors.Summary) {
	l := rules.Lineage
	if l == nil {
		return
	}
	var misfits []string
	for _, from := range l.From {
		t, err := ArchTensors(from.Config)
		if err != nil {
			c.violate(tasks.CheckLineage, "the lineage of %s cannot be checked: %v", from.Name, err)
			return
		}
		bad := misfit(l.Mode, t, s.Tensors)
		if len(bad) == 0 {
			return
		}
		misfits = append(misfits, fmt.Sprintf("%s: %s", from.Name, bad))
	}
	c.violate(tasks.CheckLineage, "the model does not derive from %s (%s)", fromNames(l), strings.Join(misfits, "; "))
}

func fromNames(l *tasks.Lineage) string {
	names := make([]string, 0, len(l.From))
	for _, m := range l.From {
		names = append(names, m.Name)
	}
	return strings.Join(names, " or ")
}

// misfit says how tensors fail to come from t under mode ("": they fit):
// subset, each is one of t's by name with no dimension larger;
// architecture, each is one of t's, its layer number aside, with t's shape.
func misfit(mode string, t Table, tensors map[string]safetensors.Tensor) string {
	want := t.Tensors
	key := func(n string) string { return n }
	if mode == tasks.LineageArchitecture {
		want = map[string][]int64{}
		for n, shape := range t.Tensors {
			want[withoutLayer(n)] = shape
		}
		key = withoutLayer
	}
	names := make([]string, 0, len(tensors))
	for n := range tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	var bad []string
	for _, n := range names {
		shape := tensors[n].Shape
		ref, ok := want[key(n)]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("%s is none of its tensors", n))
		case mode == tasks.LineageArchitecture && !slices.Equal(shape, ref):
			bad = append(bad, fmt.Sprintf("%s is %v, not %v", n, shape, ref))
		case mode == tasks.LineageSubset && !within(shape, ref):
			bad = append(bad, fmt.Sprintf("%s is %v, larger than %v", n, shape, ref))
		}
	}
	if len(bad) == 0 {
		return ""
	}
	if len(bad) > 3 {
		return fmt.Sprintf("%s and %d more", strings.Join(bad[:3], ", "), len(bad)-3)
	}
	return strings.Join(bad, ", ")
}

// within tells a shape of the same rank as ref with no dimension larger.
func within(shape, ref []int64) bool {
	if len(shape) != len(ref) {
		return false
	}
	for i := range shape {
		if shape[i] > ref[i] {
			return false
		}
	}
	return true
}
