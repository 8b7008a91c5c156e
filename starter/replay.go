package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mlrb/mlrb/internal/cli"
	"github.com/mlrb/mlrb/workflows"
)

// replayCmd checks live runs against this build before it is deployed:
// their histories, exported by the temporal CLI, replayed through its
// workflow code.
func replayCmd() *cobra.Command {
	var workflowID string
	cmd := &cobra.Command{
		Use:   "replay FILE...",
		Short: "replay histories (`temporal workflow show -w ID --output json`) through this build's workflow code: fails if a live run would not replay",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			// Every file is read first: a file that is not a history is
			// bad input, found before anything is replayed.
			hists := make([]*workflows.History, len(files))
			for i, f := range files {
				h, err := workflows.LoadHistory(f)
				if err != nil {
					return cli.Usagef("replay: %v (export one with `temporal workflow show -w ID --output json > FILE`)", err)
				}
				if workflowID != "" {
					h.WorkflowID = workflowID
				}
				hists[i] = h
			}
			out := cmd.OutOrStdout()
			failed := 0
			for _, h := range hists {
				if err := h.Replay(); err != nil {
					fmt.Fprintf(out, "FAIL  %s: %v\n", h.File, err)
					failed++
					continue
				}
				fmt.Fprintf(out, "ok    %s\n", h.File)
			}
			if failed > 0 {
				return fmt.Errorf("%d of %d histories would not replay on this build: gate the change with workflow.GetVersion (README: Changing workflow code under live runs)", failed, len(files))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&workflowID, "workflow-id", "", "the workflow id the histories were recorded under (a benchmark's run ids derive from it; default: FILE.id if there)")
	return cmd
}
