// Command gpu is the real tasks' GPU rehearsal, for any host with
// python3, torch and transformers (and the GPU machine when one is lent):
//
//   - the worker's rule checks, read from safetensors headers, against
//     transformers' own parameter counts, bytes and dtypes on real
//     architectures built from their configs (phi-2, Llama-3-8B,
//     Mistral-7B, Qwen2, GPT-2, T5, a PEFT adapter dir, a model with
//     auto_map), weight files written sparse so nothing is downloaded;
//     and the lineage tables the worker derives (phi-2, the experts)
//     against transformers' state dicts: exact agreement;
//   - with a GPU, the peak memory of a batch-1 pass over 2,000 tokens for
//     phi-2 in FP32 and FP16 beside the worker's formula, and the named
//     verdict on a GPT-2 of 1,024 positions.
//
// It prints every figure and exits 1 on any disagreement. Without torch
// it prints the worker's own figures and says what was not run.
//
// Run it from the repository's root: its helper (bench/gpu/archs.py)
// runs deploy/lmeval/mlrb-peak-memory as the evaluator does.
//
//	go run ./bench/gpu [-python python3]
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mlrb/mlrb/internal/scoring/model"
	"github.com/mlrb/mlrb/internal/scoring/safetensors"
	"github.com/mlrb/mlrb/tasks"
)

func main() {
	python := flag.String("python", "python3", "a python3 with torch and transformers")
	flag.Parse()
	bad, err := run(*python)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/gpu:", err)
		os.Exit(1)
	}
	if bad > 0 {
		fmt.Printf("bench/gpu: %d disagreements\n", bad)
		os.Exit(1)
	}
	fmt.Println("bench/gpu: no disagreement")
}

func run(python string) (int, error) {
	cat, err := tasks.Load("")
	if err != nil {
		return 0, err
	}
	compression, _ := cat.Get("edge_llm_compression")
	training, _ := cat.Get("edge_llm_training")
	merging, _ := cat.Get("llm_merging")
	formula := workerFigures(compression, training)
	out, err := os.MkdirTemp("", "mlrb-bench-gpu-")
	if err != nil {
		return 0, err
	}
	defer func() { _ = os.RemoveAll(out) }()
	script := filepath.Join("bench", "gpu", "archs.py")
	if _, err := os.Stat(script); err != nil {
		return 0, fmt.Errorf("run it from the repository's root: %w", err)
	}
	if exec.Command(python, "-c", "import torch, transformers").Run() != nil {
		fmt.Printf("not run: %s has no torch and transformers; the checks against transformers and the GPU figures need a host that has them\n", python)
		return 0, nil
	}
	cmd := exec.Command(python, script, filepath.Join(out, "models"), "--peak")
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("archs.py: %w", err)
	}
	var rep report
	if err := readJSON(strings.TrimSpace(string(b)), &rep); err != nil {
		return 0, err
	}
	fmt.Printf("torch %s, transformers %s\n", rep.Torch, rep.Transformers)
	bad := 0
	for _, name := range slices.Sorted(maps.Keys(rep.Models)) {
		bad += checkModel(name, rep.Models[name], compression, merging)
	}
	bad += checkPeak(rep.Peak, formula)
	return bad, nil
}

type report struct {
	Torch        string            `json:"torch"`
	Transformers string            `json:"transformers"`
	Models       map[string]string `json:"models"`
	Peak         map[string]any    `json:"peak"`
}

type facts struct {
	Params  int64              `json:"params"`
	Bytes   int64              `json:"bytes"`
	DTypes  map[string]int64   `json:"dtypes"`
	Tensors map[string][]int64 `json:"tensors"`
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// workerFigures prints what the worker computes of the edge rules, from
// config.json alone (the figures a host without a GPU judges by).
func workerFigures(compression, training *tasks.Spec) map[string]float64 {
	phi := compression.Constraints.Lineage.From[0].Config
	tab, _ := model.ArchTensors(phi)
	b, _ := json.Marshal(phi)
	a, _ := model.ParseArch(b)
	out := map[string]float64{}
	for _, d := range []struct {
		name string
		elem int64
	}{{"float32", 4}, {"float16", 2}} {
		p, err := model.PeakMemory(a, tab.Params()*d.elem, d.elem, compression.Constraints.PeakContextOf())
		if err != nil {
			fmt.Println("worker formula:", err)
			continue
		}
		out["phi-2 "+d.name] = float64(p.Total())
		fmt.Printf("worker formula: phi-2 in %s over %d tokens: %.3g bytes (weights %.3g, KV cache %.3g, activations %.3g); the limit is %.3g\n",
			d.name, compression.Constraints.PeakContextOf(), float64(p.Total()), float64(p.Weights), float64(p.KVCache), float64(p.Activations), float64(compression.Constraints.MaxPeakMemoryBytes))
	}
	fmt.Printf("worker rule: a GPT-2 of 1,024 positions under %s's %d-token rule breaks %q\n", training.ID, training.Constraints.PeakContextOf(), tasks.CheckContext)
	return out
}

// checkModel holds the worker's reading of one model dir to what
// transformers said of it; it returns the disagreements.
func checkModel(name, dir string, compression, merging *tasks.Spec) int {
	bad := 0
	fail := func(format string, args ...any) {
		bad++
		fmt.Printf("DISAGREE %s: %s\n", name, fmt.Sprintf(format, args...))
	}
	switch name {
	case "peft-adapter":
		_, err := model.CheckConstraints(dir, compression)
		if !errors.Is(err, safetensors.ErrNoFiles) {
			fail("an adapter dir alone must be refused as no weights: %v", err)
		} else {
			fmt.Printf("%s: refused (%v)\n", name, err)
		}
		return bad
	case "auto-map":
		c, err := model.CheckConstraints(dir, compression)
		if err != nil || !slices.Contains(c.Broken, tasks.CheckRemoteCode) {
			fail("auto_map must break %s: %v %v", tasks.CheckRemoteCode, err, c)
		} else {
			fmt.Printf("%s: breaks %s\n", name, tasks.CheckRemoteCode)
		}
		return bad
	}
	var tf facts
	if err := readJSON(filepath.Join(dir, "transformers.json"), &tf); err != nil {
		fail("%v", err)
		return bad
	}
	s, err := safetensors.Summarise(dir)
	if err != nil {
		fail("the worker cannot read it: %v", err)
		return bad
	}
	if s.Params != tf.Params {
		fail("parameters: worker %d, transformers %d", s.Params, tf.Params)
	}
	if s.Bytes != tf.Bytes {
		fail("bytes: worker %d, transformers %d", s.Bytes, tf.Bytes)
	}
	if !maps.Equal(s.DTypes, tf.DTypes) {
		fail("dtypes: worker %v, transformers %v", s.DTypes, tf.DTypes)
	}
	fmt.Printf("%s: %d parameters, %d bytes, %v (worker and transformers)\n", name, s.Params, s.Bytes, s.DTypes)
	lineage := map[string]string{"phi-2": "microsoft/phi-2", "llama-3-8b": "meta-llama/Meta-Llama-3-8B", "mistral-7b": "mistralai/Mistral-7B-v0.1", "flan-t5-base": "google/flan-t5-base"}
	want, ok := lineage[name]
	if !ok {
		return bad
	}
	for _, spec := range []*tasks.Spec{compression, merging} {
		for _, m := range spec.Constraints.Lineage.From {
			if m.Name != want {
				continue
			}
			tab, err := model.ArchTensors(m.Config)
			if err != nil {
				fail("%v", err)
				continue
			}
			for n, shape := range tf.Tensors {
				if got, ok := tab.Tensors[n]; !ok || !slices.Equal(got, shape) {
					fail("%s's lineage table has %s as %v, transformers %v", spec.ID, n, got, shape)
				}
			}
			for n := range tab.Tensors {
				if _, ok := tf.Tensors[n]; !ok && !tab.Aliases[n] {
					fail("%s's lineage table has %s, which transformers does not", spec.ID, n)
				}
			}
			fmt.Printf("%s: %s's lineage table matches transformers' %d tensors\n", name, spec.ID, len(tf.Tensors))
		}
	}
	return bad
}

// checkPeak prints the GPU's peaks beside the formula's; the verdicts
// under the 12 GB rule must agree.
func checkPeak(peak map[string]any, formula map[string]float64) int {
	if peak == nil {
		fmt.Println("not run: no GPU, so no peak memory was measured")
		return 0
	}
	bad := 0
	fmt.Printf("GPU: %v\n", peak["device"])
	for _, k := range []string{"phi-2 float32", "phi-2 float16"} {
		got, _ := peak[k].(float64)
		f := formula[k]
		fmt.Printf("%s over 2000 tokens: measured %.4g bytes, worker formula %.4g (ratio %.3f)\n", k, got, f, f/got)
		if (got > 12e9) != (f > 12e9) {
			bad++
			fmt.Printf("DISAGREE %s: the formula and the GPU judge the 12 GB rule differently\n", k)
		}
	}
	if g, ok := peak["gpt2 1024 positions"].(map[string]any); !ok || g["max_positions"] != 1024.0 {
		bad++
		fmt.Printf("DISAGREE gpt2: mlrb-peak-memory must name its 1,024 positions: %v\n", peak["gpt2 1024 positions"])
	} else {
		fmt.Printf("gpt2 of 1,024 positions: not run over 2,000 tokens, named (%v)\n", g)
	}
	return bad
}
