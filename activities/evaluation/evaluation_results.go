// An evaluation's results and log kept in the store.

package evaluation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/sandbox/workspace"
	"github.com/mlrb/mlrb/internal/scoring/evaldata"
	"github.com/mlrb/mlrb/internal/scoring/lmeval"
	"github.com/mlrb/mlrb/internal/scoring/model"
	"github.com/mlrb/mlrb/internal/store/keys"
	"github.com/mlrb/mlrb/internal/store/safefs"
)

// keepResults stores the results the score was read from in the blob
// store, under the evaluation's name (its directory goes), and returns
// its key.
func (a *Evaluations) keepResults(ctx context.Context, runID, evaluation, name string, body []byte) (string, error) {
	key := keys.Evaluation(runID, evaluation, name)
	if err := a.Runs.Engine.Store.Put(ctx, key, bytes.NewReader(body)); err != nil {
		return "", fmt.Errorf("keep results: %w", err)
	}
	return key, nil
}

// readResults reads the results this evaluation wrote, and no other
// file: the one its command named {results} (a name the worker chose for
// this evaluation), or, for a command that names none, the one
// results*.json under {output}; more than one is refused, since which
// of them the evaluator wrote cannot be told. What an evaluator leaves
// is read like an agent's tree: from descriptors, never through a link,
// capped at lmeval.MaxBytes.
func readResults(ev *workspace.EvalDirs, command []string) (string, []byte, error) {
	if slices.ContainsFunc(command, func(a string) bool { return strings.Contains(a, "{results}") }) {
		b, err := safefs.ReadFile(ev.Results, ev.ResultsName, lmeval.MaxBytes)
		if err != nil {
			return "", nil, fmt.Errorf("the evaluator's results %s: %w", ev.ResultsName, err)
		}
		return ev.ResultsName, b, nil
	}
	d, err := safefs.OpenDir(ev.Results)
	if err != nil {
		return "", nil, err
	}
	defer func() { _ = d.Close() }()
	var found []string
	err = d.Walk(func(e safefs.Entry) error {
		if e.Mode().IsRegular() && strings.HasPrefix(e.Name, "results") && strings.HasSuffix(e.Name, ".json") {
			found = append(found, e.Rel)
		}
		return nil
	})
	switch {
	case err != nil:
		return "", nil, fmt.Errorf("find the evaluator's results: %w", err)
	case len(found) == 0:
		return "", nil, errors.New("the evaluator wrote no results_*.json")
	case len(found) > 1:
		return "", nil, fmt.Errorf("the evaluator left %d results files (%s): which one it wrote cannot be told; name the file as {results} in evaluation.command", len(found), strings.Join(found, ", "))
	}
	b, err := safefs.ReadFile(ev.Results, found[0], lmeval.MaxBytes)
	if err != nil {
		return "", nil, fmt.Errorf("the evaluator's results: %w", err)
	}
	return found[0], b, nil
}

// withData adds to an evaluator's provenance the digest of each data
// set the worker checked and gave it: what the score was measured on.
func withData(p map[string]string, data []workspace.DataSet) map[string]string {
	if len(data) == 0 {
		return p
	}
	out := maps.Clone(p)
	if out == nil {
		out = map[string]string{}
	}
	for _, d := range data {
		out[evaldata.ProvenanceKey(d.Name)] = d.SHA256
	}
	return out
}

// readUsage reads the LLM usage the agent reported, if it did.
func readUsage(root snapshot) *contract.SelfReport {
	wrel, err := filepath.Rel(root.dir, root.workdir)
	if err != nil {
		return nil
	}
	b, err := safefs.ReadFile(root.dir, filepath.Join(wrel, contract.OutputDir, contract.UsageFile), model.MaxReport)
	if err != nil {
		return nil
	}
	var u contract.SelfReport
	if json.Unmarshal(b, &u) != nil || u.Check() != nil {
		return nil // the agent's own report: unusable, so not reported
	}
	return &u
}
