// `starter replay`: its flags and what it does.

package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/workflows"
)

// replayOptions are `starter replay`'s flags.
type replayOptions struct{ workflowID string }

func (o *replayOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.workflowID, "workflow-id", "", "the workflow id the histories were recorded under (a benchmark's run ids derive from it; default: FILE.id if there)")
}

// replayCmd checks live runs against this build before it is deployed:
// their histories, exported by the temporal CLI, replayed through its
// workflow code.
func replayCmd() *cobra.Command {
	var o replayOptions
	cmd := &cobra.Command{
		Use:   "replay FILE...",
		Short: "replay histories (`temporal workflow show -w ID --output json`) through this build's workflow code: fails if a live run would not replay",
		Args:  cobra.MinimumNArgs(1),
		RunE:  run(func(g *globals, files []string) error { return runReplay(g, o, files) }),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// runReplay replays each file. Every file is read first: a file that is
// not a history is bad input, found before anything is replayed.
func runReplay(g *globals, o replayOptions, files []string) error {
	hists := make([]*workflows.History, len(files))
	for i, f := range files {
		h, err := workflows.LoadHistory(f)
		if err != nil {
			return cli.Usagef("replay: %v (export one with `temporal workflow show -w ID --output json > FILE`)", err)
		}
		if o.workflowID != "" {
			h.WorkflowID = o.workflowID
		}
		hists[i] = h
	}
	failed := 0
	for _, h := range hists {
		if err := h.Replay(); err != nil {
			fmt.Fprintf(g.out, "FAIL  %s: %v\n", h.File, err)
			failed++
			continue
		}
		fmt.Fprintf(g.out, "ok    %s\n", h.File)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d histories would not replay on this build: gate the change with workflow.GetVersion (docs/develop/versioning.md)", failed, len(files))
	}
	return nil
}
