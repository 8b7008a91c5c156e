// Arch is what a Hugging Face config.json says of a model's shape, under the names the common families use (Llama and most.

package model

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/mlrb/mlrb/internal/scoring/safetensors"
)

// Arch is what a Hugging Face config.json says of a model's shape, under
// the names the common families use (Llama and most: num_hidden_layers,
// hidden_size; GPT-2: n_layer, n_embd; T5: num_layers, d_model).
type Arch struct {
	ModelType    string `json:"model_type"`
	Layers       int64
	Hidden       int64
	Heads        int64
	KVHeads      int64
	HeadDim      int64
	Intermediate int64
	Vocab        int64
	// MaxPositions is the longest input it takes (0: not bounded by its
	// config, as T5's relative positions), read from PositionsKey.
	MaxPositions int64
	PositionsKey string
	// EncoderDecoder is a seq2seq model (T5, BART): DecoderLayers is its
	// decoder's depth, Layers its encoder's.
	EncoderDecoder bool
	DecoderLayers  int64
}

// ParseArch reads config.json's fields, whichever family's names they
// carry; a dimension it does not find stays 0.
func ParseArch(b []byte) (*Arch, error) {
	var a Arch
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("config.json: %w", err)
	}
	var raw map[string]any
	_ = json.Unmarshal(b, &raw)
	first := func(keys ...string) int64 {
		for _, k := range keys {
			if v, ok := raw[k].(float64); ok && v > 0 {
				return int64(v)
			}
		}
		return 0
	}
	a.Layers = first("num_hidden_layers", "n_layer", "num_layers")
	a.Hidden = first("hidden_size", "n_embd", "d_model")
	a.Heads = first("num_attention_heads", "n_head", "num_heads")
	a.KVHeads = first("num_key_value_heads", "n_head_kv", "num_kv_heads")
	if a.KVHeads == 0 {
		a.KVHeads = a.Heads
	}
	a.HeadDim = first("head_dim", "d_kv")
	if a.HeadDim == 0 && a.Heads > 0 {
		a.HeadDim = a.Hidden / a.Heads
	}
	a.Intermediate = first("intermediate_size", "n_inner", "ffn_dim", "d_ff")
	if a.Intermediate == 0 {
		a.Intermediate = 4 * a.Hidden // GPT-2's default
	}
	a.Vocab = first("vocab_size", "padded_vocab_size")
	for _, k := range []string{"max_position_embeddings", "n_positions", "n_ctx"} {
		if v := first(k); v > 0 {
			a.MaxPositions, a.PositionsKey = v, k
			break
		}
	}
	if ed, ok := raw["is_encoder_decoder"].(bool); ok && ed {
		a.EncoderDecoder = true
		a.DecoderLayers = first("num_decoder_layers", "decoder_layers")
		if a.DecoderLayers == 0 {
			a.DecoderLayers = a.Layers
		}
	}
	return &a, nil
}

// Peak is the memory of one forward pass, by part, in bytes.
type Peak struct {
	Weights     int64
	KVCache     int64
	Activations int64
}

// Total is the whole peak.
func (p Peak) Total() int64 { return p.Weights + p.KVCache + p.Activations }

// PeakMemory computes the memory one forward pass at batch 1 over
// context tokens needs, as the edge competition measured it (torch's
// max_memory_allocated over such a pass): the weights; the KV cache, 2 ×
// layers × context × KV heads × head dim elements; and the largest
// activations alive at once: four hidden-state tensors, the larger of
// the attention scores (heads × context²) and the MLP's two intermediate
// tensors, and the logits in float32. A seq2seq model's pass reads
// context tokens into its encoder and as many into its decoder (its own
// class's forward pass, as the evaluator measures it): the decoder's
// cache holds its self- and cross-attention keys and values, and the
// encoder's output stays alive beside them. elem is the bytes of one
// element in the dtype the model is loaded in.
func PeakMemory(a *Arch, weights, elem int64, context int) (Peak, error) {
	var missing []string
	for name, v := range map[string]int64{"layers": a.Layers, "hidden size": a.Hidden, "attention heads": a.Heads, "vocabulary size": a.Vocab} {
		if v <= 0 {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return Peak{}, fmt.Errorf("config.json gives no %s", strings.Join(missing, ", "))
	}
	t := int64(context)
	kv := 2 * a.Layers * t * a.KVHeads * a.HeadDim * elem
	hidden := 4 * t * a.Hidden * elem
	if a.EncoderDecoder {
		kv = 4 * a.DecoderLayers * t * a.KVHeads * a.HeadDim * elem
		hidden += t * a.Hidden * elem
	}
	scores := a.Heads * t * t * elem
	mlp := 2 * t * a.Intermediate * elem
	act := hidden + max(scores, mlp) + t*a.Vocab*4
	return Peak{Weights: weights, KVCache: kv, Activations: act}, nil
}

// ShapeDigest identifies a model's architecture by its tensors: the
// SHA-256 of every tensor's name and shape, sorted by name. Two models
// with the same digest have the same tensors, whatever their values or
// dtypes: a "compressed" model with its reference's digest removed
// nothing.
func ShapeDigest(tensors map[string]safetensors.Tensor) string {
	names := make([]string, 0, len(tensors))
	for n := range tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s%v\n", n, tensors[n].Shape)
	}
	return hex.EncodeToString(h.Sum(nil))
}
