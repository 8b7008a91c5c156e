// Command certagent is an MLRB-contract agent that breaks the contract on
// purpose, in the one way CERTAGENT_MODE names, for `starter certify` to
// find: startover (ignores the workspace it was restored with), nosigterm
// (ignores SIGTERM and its deadline), outside (keeps a memory outside the
// workspace, undeclared), nodeadline (reads its deadline once, at start).
// Otherwise it keeps the contract: an untrained model and its
// submission first, then 40 steps of work in the workspace, each kept.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/scoring/reference"
	"github.com/mlrb/mlrb/tasks"
)

const steps = 40

func main() {
	if err := work(os.Getenv("CERTAGENT_MODE")); err != nil {
		fmt.Println("certagent:", err)
		os.Exit(1)
	}
}

func work(mode string) error {
	env, err := contract.FromEnv(os.Getenv)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(env.TaskSpec)
	if err != nil {
		return err
	}
	var spec tasks.Spec
	if err := json.Unmarshal(b, &spec); err != nil {
		return err
	}
	out := env.OutputDir()
	// The first model and its submission, unless a resumed workspace
	// holds them (one that starts over writes them again).
	if _, err := os.Stat(filepath.Join(out, contract.SubmissionFile)); err != nil || mode == "startover" {
		if err := reference.Untrained(&spec, filepath.Join(out, "model")); err != nil {
			return err
		}
		sub, _ := json.Marshal(contract.Submission{ModelPath: contract.OutputDir + "/model"})
		if err := os.WriteFile(filepath.Join(out, contract.SubmissionFile), sub, 0o644); err != nil {
			return err
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	if mode == "nosigterm" {
		signal.Ignore(syscall.SIGTERM)
	} else {
		ctx, stop = signal.NotifyContext(ctx, syscall.SIGTERM)
		defer stop()
	}
	progress := filepath.Join(env.Workdir, "progress.txt")
	start := 0
	if b, err := os.ReadFile(progress); err == nil && mode != "startover" {
		fmt.Sscan(strings.TrimSpace(string(b)), &start)
	}
	fmt.Printf("mode %q attempt %d: from step %d\n", mode, env.Attempt, start)
	for i := start; i < steps && ctx.Err() == nil; i++ {
		deadline := env.CurrentDeadline()
		switch mode {
		case "nodeadline":
			deadline = env.Deadline
		case "nosigterm":
			deadline = time.Now().Add(time.Hour)
		}
		if time.Until(deadline) < 500*time.Millisecond {
			fmt.Println("deadline near: stopping")
			break
		}
		if err := step(env, mode, i, progress); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
	fmt.Println("done; the submission stands")
	return nil
}

// step writes step i's result, the same bytes whichever attempt writes
// it, and the progress after it.
func step(env contract.Env, mode string, i int, progress string) error {
	dir := filepath.Join(env.Workdir, "steps")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	body := strings.Repeat(fmt.Sprintf("step %03d of seed %d\n", i, env.Seed), 64)
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("step-%03d.txt", i)), []byte(body), 0o644); err != nil {
		return err
	}
	if mode == "outside" {
		if err := os.MkdirAll("/tmp/certagent", 0o755); err != nil {
			return err
		}
		if err := os.WriteFile("/tmp/certagent/memory.txt", []byte(fmt.Sprint(i+1)), 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(progress, []byte(fmt.Sprint(i+1)), 0o644)
}
