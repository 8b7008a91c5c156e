// Command labagent stands in for a research agent whose experiments the
// worker observes from the host: it runs itself four times as an
// experiment, one after another from one driver, as an agent runs
// training scripts: one finishes and writes a model (the no-op agent's
// untrained one, a valid submission), one crashes, one allocates memory
// until its container's OOM killer ends it, and the last runs until the
// deadline cuts it off. The agent itself waits for its SIGTERM.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	refagent "github.com/mlrb/mlrb/agents/reference"
	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/tasks"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == "experiment" {
		if err := experiment(os.Args[2]); err != nil {
			fmt.Println("labagent experiment:", err)
			os.Exit(1)
		}
		return
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	for _, kind := range []string{"finish", "crash", "oom"} {
		cmd := exec.Command(os.Args[0], "experiment", kind)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		fmt.Println("experiment", kind, "ended:", cmd.Run())
	}
	long := exec.Command(os.Args[0], "experiment", "long")
	long.Stdout, long.Stderr = os.Stdout, os.Stderr
	if err := long.Start(); err != nil {
		fmt.Println("labagent:", err)
		os.Exit(1)
	}
	<-term
	fmt.Println("SIGTERM: the long experiment is cut off")
}

func experiment(kind string) error {
	switch kind {
	case "finish":
		time.Sleep(2500 * time.Millisecond)
		env, err := contract.FromEnv(os.Getenv)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(os.Getenv(contract.EnvTaskSpec))
		if err != nil {
			return err
		}
		var spec tasks.Spec
		if err := json.Unmarshal(b, &spec); err != nil {
			return err
		}
		return refagent.Noop(&spec, env)
	case "crash":
		time.Sleep(2 * time.Second)
		return fmt.Errorf("diverged: loss is NaN")
	case "oom":
		// Slow enough to count as an experiment before the limit hits.
		time.Sleep(time.Second)
		var held [][]byte
		for range 256 {
			b := make([]byte, 16<<20)
			for i := range b {
				if i%4096 == 0 {
					b[i] = 1
				}
			}
			held = append(held, b)
			time.Sleep(100 * time.Millisecond)
		}
		return fmt.Errorf("allocated %d MiB and was never killed", len(held)*16)
	case "long":
		time.Sleep(time.Hour)
		return nil
	}
	return fmt.Errorf("no experiment %q", kind)
}
