// History is an exported history and the workflow id it ran under.

package workflows

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// History is an exported history and the workflow id it ran under.
type History struct {
	File string
	// WorkflowID: a benchmark's child ids derive from it ("": unknown).
	WorkflowID string
	events     *historypb.History
}

// LoadHistory reads a history exported as JSON (the temporal CLI's
// `workflow show --output json`) and the workflow id in FILE.id beside
// it, if any.
func LoadHistory(file string) (*History, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	defer f.Close()
	hist, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	if err != nil {
		return nil, fmt.Errorf("history %s: %w", file, err)
	}
	if len(hist.GetEvents()) == 0 {
		return nil, fmt.Errorf("history %s: no events", file)
	}
	h := &History{File: file, events: hist}
	switch id, err := os.ReadFile(file + ".id"); {
	case err == nil:
		h.WorkflowID = strings.TrimSpace(string(id))
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("workflow id of %s: %w", file, err)
	}
	return h, nil
}

// Replay replays the history through the current workflow code: it fails
// when the code would not reproduce the commands the history holds.
func (h *History) Replay() error {
	var opts worker.ReplayWorkflowHistoryOptions
	if h.WorkflowID != "" {
		opts.OriginalExecution = workflow.Execution{ID: h.WorkflowID, RunID: "replayed"}
	}
	// A replay asks whether the code reproduces the history's commands;
	// a task slow on a loaded machine is no answer to that, so the 1 s
	// deadlock bound is off.
	r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{DisableDeadlockDetection: true})
	if err != nil {
		return fmt.Errorf("replayer: %w", err)
	}
	RegisterWorkflows(r)
	// The returned error names the mismatch; the replayer's own log of
	// it (a stack trace) would only bury it.
	quiet := log.NewStructuredLogger(slog.New(slog.DiscardHandler))
	if err := r.ReplayWorkflowHistoryWithOptions(quiet, h.events, opts); err != nil {
		return fmt.Errorf("replay of %s: %w", h.File, err)
	}
	return nil
}
