// The leaderboard as Every Eval Ever v0.2.1 records.

package export

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mlrb/mlrb/internal/results/leaderboard"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/tasks"
)

// EEEVersion is the Every Eval Ever schema version WriteEEE writes
// (github.com/evaleval/every_eval_ever, eval.schema.json).
const EEEVersion = "0.2.1"

// EEE is what an Every Eval Ever export is made of: the benchmarks'
// leaderboard rows, their runs (for each agent's definition) and the
// tasks' specs, with who publishes it.
type EEE struct {
	Benchmarks []string
	Rows       []leaderboard.Row
	Runs       []runs.Result
	Specs      map[string]*tasks.Spec
	// Organization publishes the results; Relationship is its relation
	// to the agents evaluated (first_party, third_party, collaborative or
	// other).
	Organization, Relationship string
	// Version is mlrb's build; Now the export's time.
	Version string
	Now     time.Time
}

// Relationships are the evaluator relationships the format knows.
var Relationships = []string{"first_party", "third_party", "collaborative", "other"}

// WriteEEE writes one Every Eval Ever record per agent into dir
// (<agent>.json): the agent as the model evaluated, one result per task
// (the mean score with the agent's failures at the task's floor, its
// 95 % interval, and the run counts beside it). It returns the files.
func WriteEEE(dir string, in EEE) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("export dir: %w", err)
	}
	byAgent := map[string][]leaderboard.Row{}
	for _, r := range in.Rows {
		byAgent[r.Agent] = append(byAgent[r.Agent], r)
	}
	var files []string
	for _, agent := range slices.Sorted(maps.Keys(byAgent)) {
		rec := eeeRecord(in, agent, byAgent[agent])
		b, err := json.MarshalIndent(rec, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", agent, err)
		}
		p := filepath.Join(dir, agent+".json")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return nil, fmt.Errorf("write %s: %w", p, err)
		}
		files = append(files, p)
	}
	return files, nil
}

type obj = map[string]any

func strs(kv ...string) obj {
	m := obj{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			m[kv[i]] = kv[i+1]
		}
	}
	return m
}

func eeeRecord(in EEE, agent string, rows []leaderboard.Row) obj {
	ts := strconv.FormatInt(in.Now.Unix(), 10)
	var results []obj
	for _, r := range rows {
		if res := eeeResult(in, r); res != nil {
			results = append(results, res)
		}
	}
	if results == nil {
		results = []obj{}
	}
	return obj{
		"schema_version":      EEEVersion,
		"evaluation_id":       strings.Join(in.Benchmarks, "+") + "/" + agent + "/" + ts,
		"retrieved_timestamp": ts,
		"source_metadata": obj{"source_name": "mlrb: ML Research Benchmark, " + strings.Join(in.Benchmarks, ", "), "source_type": "evaluation_run",
			"source_organization_name": in.Organization, "evaluator_relationship": in.Relationship,
			"additional_details": strs("benchmarks", strings.Join(in.Benchmarks, ","))},
		"model_info":         eeeModel(in.Runs, agent),
		"eval_library":       obj{"name": "mlrb", "version": in.Version},
		"evaluation_results": results,
	}
}

// eeeModel is the agent as the model evaluated: its provider and model
// (the LLM that drives it), its definition and image by digest.
func eeeModel(rs []runs.Result, agent string) obj {
	m := obj{"name": agent, "id": "mlrb-agent/" + agent}
	for _, r := range rs {
		d := r.AgentDef
		if r.Agent != agent || d == nil {
			continue
		}
		if d.Provider != "" && d.Model != "" {
			m["id"], m["developer"] = d.Provider+"/"+d.Model, d.Provider
		}
		m["additional_details"] = strs("agent", agent, "definition_hash", d.Hash, "image_digest", d.Image, "builtin", d.Builtin,
			"note", "the model evaluated is an agent: the LLM named by id, driven by the agent's code (its image)")
		break
	}
	return m
}

// eeeResult is one task's row: nil when it has no run to count.
func eeeResult(in EEE, r leaderboard.Row) obj {
	if r.Counted == 0 || math.IsNaN(r.FloorMean) {
		return nil
	}
	spec := in.Specs[r.Task]
	metric, goal, source := r.Task, "", obj{"dataset_name": r.Task, "source_type": "other"}
	limit := 0.0
	if spec != nil {
		metric, goal = spec.Metric.Name, spec.Goal
		limit = spec.TimeLimit.D().Seconds()
		if len(spec.Datasets) > 0 {
			source = eeeSource(spec.Datasets[0])
		}
	}
	unc := obj{"num_samples": r.Counted}
	if !math.IsNaN(r.FloorLow) && !math.IsNaN(r.FloorHigh) {
		unc["confidence_interval"] = obj{"lower": r.FloorLow, "upper": r.FloorHigh, "confidence_level": 0.95, "method": "student_t over seeds"}
	}
	if !math.IsNaN(r.FloorStd) {
		unc["standard_deviation"] = r.FloorStd
	}
	details := strs("runs", strconv.Itoa(r.Runs), "scored", strconv.Itoa(r.Scored), "agent_failed", strconv.Itoa(r.AgentFailed),
		"disqualified", strconv.Itoa(r.Disqualified), "hacked_on_review", strconv.Itoa(r.Hacked), "apart", strconv.Itoa(r.Invalid),
		"failure_floor", strconv.FormatFloat(r.Floor, 'g', -1, 64), "floor_from", r.FloorFrom, "success_rate", strconv.FormatFloat(r.SuccessRate, 'g', 4, 64))
	if !math.IsNaN(r.Mean) {
		details["mean_of_scored_runs"] = strconv.FormatFloat(r.Mean, 'g', -1, 64)
	}
	if !math.IsNaN(r.GapClosed) {
		details["gap_closed_pct"] = strconv.FormatFloat(r.GapClosed, 'f', 1, 64)
	}
	res := obj{
		"evaluation_name": "mlrb/" + r.Task,
		"source_data":     source,
		"metric_config": obj{"evaluation_description": metric + ": " + goal + " The score is the mean over seeds with the agent's failures at the task's floor.",
			"lower_is_better": false, "score_type": "continuous", "min_score": 0.0, "max_score": 1.0},
		"score_details": obj{"score": r.FloorMean, "details": details, "uncertainty": unc},
	}
	if limit > 0 {
		res["generation_config"] = obj{"generation_args": obj{"eval_limits": obj{"time_limit": int64(limit)}},
			"additional_details": strs("agent_time_limit_s", strconv.FormatFloat(limit, 'f', 0, 64), "hardware", hardware(in.Runs, r))}
	}
	return res
}

func hardware(rs []runs.Result, r leaderboard.Row) string {
	for _, x := range rs {
		if x.Task == r.Task && x.Agent == r.Agent && x.Hardware != "" {
			return x.Hardware
		}
	}
	return ""
}

// eeeSource is a task's dataset as the format names sources: a Hugging
// Face dataset, a URL, or other (mlrb's generated mini-suite data).
func eeeSource(d tasks.Dataset) obj {
	switch {
	case strings.HasPrefix(d.URI, "hf://datasets/") && len(d.URI) > len("hf://datasets/"):
		return obj{"dataset_name": d.Name, "source_type": "hf_dataset", "hf_repo": strings.TrimPrefix(d.URI, "hf://datasets/")}
	case strings.HasPrefix(d.URI, "https://") || strings.HasPrefix(d.URI, "http://"):
		return obj{"dataset_name": d.Name, "source_type": "url", "url": []string{d.URI}}
	}
	return obj{"dataset_name": d.Name, "source_type": "other", "additional_details": strs("uri", d.URI, "notes", d.Notes)}
}
