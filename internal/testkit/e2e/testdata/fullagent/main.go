// Command fullagent stands in for an LLM research agent on the full
// suite's tasks in the full-suite test: it checks that its leased GPUs
// reached its container as device files, then submits a model that keeps
// its task's rules in safetensors (fp16; a small Llama of an approved
// family, phi-2 pruned to two narrow layers for the compression task,
// and Flan-T5-small's architecture for the merging task, its weights a
// hole) whose config.json carries a quality the stand-in evaluator
// reports as its score: a function of the model it was told (MLRB_MODEL)
// and its seed.
package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/mlrb/mlrb/internal/scoring/model"
)

func main() {
	if err := run(); err != nil {
		fmt.Println("fullagent:", err)
		os.Exit(1)
	}
}

func run() error {
	if v := os.Getenv("NVIDIA_VISIBLE_DEVICES"); v != "" && v != "void" {
		for _, id := range strings.Split(v, ",") {
			if _, err := os.Stat("/dev/nvidia" + id); err != nil {
				return fmt.Errorf("leased GPU %s is not in the container: %w", id, err)
			}
		}
		fmt.Println("GPUs", v)
	} else {
		return fmt.Errorf("no GPU leased for task %s", os.Getenv("MLRB_TASK"))
	}
	seed, _ := strconv.Atoi(os.Getenv("MLRB_SEED"))
	h := fnv.New32a()
	h.Write([]byte(os.Getenv("MLRB_MODEL")))
	quality := 0.3 + float64(h.Sum32()%20)/100 + 0.02*float64(seed%3)
	out := os.Getenv("MLRB_OUTPUT_DIR")
	dir := filepath.Join(out, "model")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cfg := map[string]any{"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
		"intermediate_size": 128, "vocab_size": 128, "max_position_embeddings": 2048}
	switch os.Getenv("MLRB_TASK") {
	case "edge_llm_compression":
		cfg["model_type"] = "phi"
	case "llm_merging":
		cfg = map[string]any{"model_type": "t5", "is_encoder_decoder": true, "num_layers": 8, "num_decoder_layers": 8, "d_model": 512, "d_ff": 1024,
			"d_kv": 64, "num_heads": 6, "vocab_size": 32128, "feed_forward_proj": "gated-gelu", "tie_word_embeddings": false}
	}
	tab, err := model.ArchTensors(cfg)
	if err != nil {
		return err
	}
	cfg["torch_dtype"], cfg["mlrb_quality"] = "float16", quality
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
		return err
	}
	if err := writeWeights(filepath.Join(dir, "model.safetensors"), tab); err != nil {
		return err
	}
	fmt.Printf("model of quality %.2f saved\n", quality)
	return os.WriteFile(filepath.Join(out, "submission.json"), []byte(`{"model_path":"output/model"}`), 0o644)
}

// writeWeights writes a safetensors file of the table's tensors (its
// tied aliases aside) in fp16, their data a hole.
func writeWeights(path string, tab model.Table) error {
	names := make([]string, 0, len(tab.Tensors))
	for n := range tab.Tensors {
		if !tab.Aliases[n] {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	hdr := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var off int64
	for _, n := range names {
		elems := int64(2)
		for _, d := range tab.Tensors[n] {
			elems *= d
		}
		hdr[n] = map[string]any{"dtype": "F16", "shape": tab.Tensors[n], "data_offsets": []int64{off, off + elems}}
		off += elems
	}
	h, _ := json.Marshal(hdr)
	var b bytes.Buffer
	_ = binary.Write(&b, binary.LittleEndian, uint64(len(h)))
	b.Write(h)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(b.Bytes()); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Truncate(int64(b.Len()) + off); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
