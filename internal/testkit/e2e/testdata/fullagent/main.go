// Command fullagent stands in for an LLM research agent on the full
// suite's tasks in the full-suite test: it checks that its leased GPUs
// reached its container as device files, then submits a small model of
// an approved family in safetensors (fp16) whose config.json carries a
// quality the stand-in evaluator reports as its score: a function of the
// model it was told (MLRB_MODEL) and its seed.
package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	cfg, _ := json.Marshal(map[string]any{"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
		"intermediate_size": 128, "vocab_size": 128, "torch_dtype": "float16", "mlrb_quality": quality})
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), weights(), 0o644); err != nil {
		return err
	}
	fmt.Printf("model of quality %.2f saved\n", quality)
	return os.WriteFile(filepath.Join(out, "submission.json"), []byte(`{"model_path":"output/model"}`), 0o644)
}

// weights is a safetensors file of one fp16 tensor, 128 × 64.
func weights() []byte {
	header := []byte(`{"embed.weight":{"dtype":"F16","shape":[128,64],"data_offsets":[0,16384]},"__metadata__":{"format":"pt"}}`)
	var b bytes.Buffer
	_ = binary.Write(&b, binary.LittleEndian, uint64(len(header)))
	b.Write(header)
	b.Write(make([]byte, 128*64*2))
	return b.Bytes()
}
