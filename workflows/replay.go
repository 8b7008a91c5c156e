package workflows

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// ReplayHistoryFile replays a history exported as JSON (the temporal CLI's
// `workflow show --output json`, or the e2e recorder) through the current
// workflow code: it fails when the code would not reproduce the commands
// the history holds. A file FILE.id beside it names the workflow id, which
// a benchmark's child ids derive from.
func ReplayHistoryFile(file string) error {
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	defer f.Close()
	hist, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	if err != nil {
		return fmt.Errorf("history %s: %w", file, err)
	}
	var opts worker.ReplayWorkflowHistoryOptions
	switch id, err := os.ReadFile(file + ".id"); {
	case err == nil:
		opts.OriginalExecution = workflow.Execution{ID: strings.TrimSpace(string(id)), RunID: "replayed"}
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("workflow id of %s: %w", file, err)
	}
	r := worker.NewWorkflowReplayer()
	RegisterWorkflows(r)
	if err := r.ReplayWorkflowHistoryWithOptions(nil, hist, opts); err != nil {
		return fmt.Errorf("replay of %s: %w", file, err)
	}
	return nil
}
