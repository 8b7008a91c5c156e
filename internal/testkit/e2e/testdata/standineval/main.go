// Command standineval stands in for the real tasks' evaluator images in
// the full-suite test (no PyPI, hub or GPU here): installed under the
// names the catalog's commands use, it writes what the real ones write,
// in lm-evaluation-harness's results shape, for the tasks it is asked
// for.
//
//	mlrb-eval-lmeval [--peak-context N] RESULTS --model hf --model_args pretrained=DIR,… --tasks T [--batch_size auto]
//	mlrb-eval-autoformalization --model DIR --results_file RESULTS --outputs DIR
//	mlrb-lean-check ITEM
//
// The score is the model's own "mlrb_quality" (its config.json), so that
// two agents' models score apart; the evaluator also checks that it was
// given exactly the leased GPUs' device files.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// superGLUE is lm-eval 0.4.12's super-glue-lm-eval-v1 with each task's
// field the catalog reads.
var superGLUE = map[string]string{"boolq": "acc,none", "cb": "acc,none", "copa": "acc,none", "multirc": "acc,none",
	"record": "f1,none", "sglue_rte": "acc,none", "wic": "acc,none", "wsc": "acc,none"}

func main() {
	if err := checkDevices(); err != nil {
		fail(err)
	}
	switch filepath.Base(os.Args[0]) {
	case "mlrb-eval-lmeval":
		fail(lmeval(os.Args[1:]))
	case "mlrb-eval-autoformalization":
		fail(autoformalization(os.Args[1:]))
	case "mlrb-lean-check":
		b, err := os.ReadFile(os.Args[1])
		if err != nil || !strings.Contains(string(b), "QED") {
			os.Exit(1)
		}
	default:
		fail(fmt.Errorf("called as %s", os.Args[0]))
	}
}

func fail(err error) {
	if err != nil {
		fmt.Println("standineval:", err)
		os.Exit(1)
	}
}

// checkDevices: every GPU NVIDIA_VISIBLE_DEVICES names is in the
// container as its device file (container.gpus: devices).
func checkDevices() error {
	v := os.Getenv("NVIDIA_VISIBLE_DEVICES")
	if v == "" || v == "void" {
		return nil
	}
	for _, id := range strings.Split(v, ",") {
		if _, err := os.Stat("/dev/nvidia" + id); err != nil {
			return fmt.Errorf("leased GPU %s has no device file here: %w", id, err)
		}
	}
	fmt.Println("GPUs", v)
	return nil
}

func quality(model string) (float64, error) {
	b, err := os.ReadFile(filepath.Join(model, "config.json"))
	if err != nil {
		return 0, err
	}
	var cfg struct {
		Quality float64 `json:"mlrb_quality"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return 0, err
	}
	return cfg.Quality, nil
}

func write(path string, results map[string]map[string]any) error {
	b, err := json.Marshal(map[string]any{"results": results, "config": map[string]any{"model": "hf"}})
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

func lmeval(args []string) error {
	var results, model, tasks string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--peak-context" || a == "--model" || a == "--batch_size":
			i++
		case a == "--model_args" && i+1 < len(args):
			i++
			for _, kv := range strings.Split(args[i], ",") {
				if v, ok := strings.CutPrefix(kv, "pretrained="); ok {
					model = v
				}
			}
		case a == "--tasks" && i+1 < len(args):
			i++
			tasks = args[i]
		case !strings.HasPrefix(a, "--") && results == "":
			results = a
		}
	}
	q, err := quality(model)
	if err != nil {
		return err
	}
	out := map[string]map[string]any{}
	for _, t := range strings.Split(tasks, ",") {
		switch t {
		case "super-glue-lm-eval-v1":
			for sub, field := range superGLUE {
				out[sub] = map[string]any{"alias": sub, field: q, strings.Replace(field, ",", "_stderr,", 1): 0.01}
			}
		default:
			out[t] = map[string]any{"alias": t, "acc,none": q, "acc_stderr,none": 0.01}
		}
	}
	fmt.Println("scored", model, "on", tasks)
	return write(results, out)
}

func autoformalization(args []string) error {
	var model, results, outputs, data string
	for i := 0; i+1 < len(args); i += 2 {
		switch args[i] {
		case "--data":
			data = args[i+1]
		case "--model":
			model = args[i+1]
		case "--results_file":
			results = args[i+1]
		case "--outputs":
			outputs = args[i+1]
		}
	}
	// The held-out set the worker mounted, read as the real evaluator does.
	if b, err := os.ReadFile(data); err != nil || len(b) == 0 {
		return fmt.Errorf("the held-out set %q: %v (%d bytes)", data, err, len(b))
	}
	q, err := quality(model)
	if err != nil {
		return err
	}
	for i, proof := range []string{"theorem t0 : 1 = 1 := rfl -- QED", "theorem t1 : 2 = 2 := rfl -- QED", "theorem t2 : 1 = 2 := sorry"} {
		if err := os.WriteFile(filepath.Join(outputs, fmt.Sprintf("%04d.lean", i)), []byte(proof), 0o644); err != nil {
			return err
		}
	}
	return write(results, map[string]map[string]any{"autoformalization": {"alias": "autoformalization", "bleu,none": q, "rouge_l,none": q}})
}
