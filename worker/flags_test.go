package main

import (
	"testing"

	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/process/cli"
)

// TestWorkerFlagsAreKeys: the worker's key flags come from the table
// (cli.WorkerKeys), none declared by hand with a default that would beat
// the table's.
func TestWorkerFlagsAreKeys(t *testing.T) {
	exposed, err := cli.KeyFlags(newRoot())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range cli.WorkerKeys {
		k, _ := config.Lookup(name)
		if !exposed[k.Flag] {
			t.Errorf("the worker lacks --%s (%s)", k.Flag, name)
		}
	}
}
