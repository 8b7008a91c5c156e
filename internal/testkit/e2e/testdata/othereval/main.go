// Command othereval is another evaluator for the mini suite, in an image
// of its own: it scores as the reference evaluator does, then marks every
// accuracy down by a tenth (a stricter grader). It gives no evaluator
// name when asked, so the worker names it by its image's digest: a
// rescore under it shows the difference and names the evaluator.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/mlrb/mlrb/internal/process/agentcmd"
)

func main() {
	args := os.Args[1:]
	if slices.Contains(args, "--name") {
		fmt.Println("othereval")
		return
	}
	root := &cobra.Command{Use: "othereval", SilenceUsage: true}
	root.AddCommand(agentcmd.Commands()...)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		os.Exit(1)
	}
	for i, a := range args {
		if (a == "--results_file" || a == "--dev_results_file") && i+1 < len(args) {
			if err := markDown(args[i+1]); err != nil {
				fmt.Println("othereval:", err)
				os.Exit(1)
			}
		}
	}
}

// markDown scales every task's accuracy in an lm-eval results file.
func markDown(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		return err
	}
	res, _ := doc["results"].(map[string]any)
	for _, v := range res {
		if m, ok := v.(map[string]any); ok {
			if acc, ok := m["acc,none"].(float64); ok {
				m["acc,none"] = acc * 0.9
			}
		}
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}
