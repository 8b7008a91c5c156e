// Which runs a resumed benchmark keeps, re-runs or carries, and their lost time.

// Package resume plans the resume of an ended benchmark: which of its
// runs are kept, which run again from their checkpoints, and the lost,
// waited and granted time those carry over.
package resume

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/mlrb/mlrb/internal/results/runresults"
	"github.com/mlrb/mlrb/internal/run/budget"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// State is how a listed run stands.
type State int

// States of a listed run: closed without a result (terminated, failed,
// timed out, canceled) is Cut.
const (
	Cut State = iota
	Running
	Completed
)

// Listed is the latest execution of a run, as visibility lists it.
type Listed struct {
	ID    string
	State State
	Start time.Time
	Close time.Time
}

// Source is where a plan reads a benchmark's runs from.
type Source interface {
	// List lists the latest execution of each run whose id starts with
	// prefix: one visibility query (paged), however many runs.
	List(ctx context.Context, prefix string) (map[string]Listed, error)
	// Results reads the results of completed runs (nil where a run has
	// none).
	Results(ctx context.Context, ids []string) (map[string]*runs.Result, error)
	// Reached asks a run that closed (at closed) without a result how far
	// it got (its status query).
	Reached(ctx context.Context, id string, closed time.Time) (Reached, error)
}

// Reached is how far a run that closed without a result got: its ledger,
// and the agent seconds it had reached when it closed.
type Reached struct {
	Budget budget.Account
	AgentS float64
}

// Entry is what a resumed benchmark does with one run: keep its result
// (Outcome set) or continue it, carrying what its earlier executions
// lost, waited and were granted.
type Entry struct {
	Outcome string          `json:"outcome,omitempty"`
	Carried *budget.Account `json:"carried,omitempty"`
}

// Entries is a resumed benchmark's plan, by run id; the starter stores
// it, the benchmark reads it a window at a time.
type Entries map[string]Entry

// RerunOutcomes end a run without a result its agent is to blame for: a
// resumed benchmark runs them again (from their checkpoints).
var RerunOutcomes = []runs.Outcome{runs.OutcomeInfraFailed, runs.OutcomeEvaluationFailed}

// Plan is a benchmark's runs sorted for a resume.
type Plan struct {
	// Kept are the runs with a result, kept as they are.
	Kept map[string]runs.Result
	// Carried is what the runs to continue lost, waited and were granted.
	Carried map[string]budget.Account
	// Again are the runs to continue, in the benchmark's order.
	Again []string
	// Busy are the runs still running.
	Busy []string
	// Uncarried names the cut-off runs whose lost time could not be read
	// (their status query failed), with why.
	Uncarried map[string]error
}

// Make sorts the runs of benchmark id for a resume.
func Make(ctx context.Context, src Source, id string, children []runresults.Child) (*Plan, error) {
	listed, err := src.List(ctx, id+"/")
	if err != nil {
		return nil, fmt.Errorf("list the runs of %s: %w", id, err)
	}
	var completed []string
	for _, r := range children {
		if l, ok := listed[r.ID]; ok && l.State == Completed {
			completed = append(completed, r.ID)
		}
	}
	results, err := src.Results(ctx, completed)
	if err != nil {
		return nil, fmt.Errorf("results of %s: %w", id, err)
	}
	p := &Plan{Kept: map[string]runs.Result{}, Carried: map[string]budget.Account{}, Uncarried: map[string]error{}}
	for _, r := range children {
		l, ok := listed[r.ID]
		switch {
		case !ok: // never started
			p.Again = append(p.Again, r.ID)
		case l.State == Running:
			p.Busy = append(p.Busy, r.ID)
		case l.State == Completed:
			if err := p.completed(r.ID, results[r.ID]); err != nil {
				return nil, err
			}
		default: // terminated, failed, timed out, canceled: cut off
			p.cutOff(ctx, src, l)
		}
	}
	return p, nil
}

func (p *Plan) completed(id string, res *runs.Result) error {
	if res == nil {
		return fmt.Errorf("run %s completed but its result is not stored", id)
	}
	if slices.Contains(RerunOutcomes, res.Outcome) {
		p.Again = append(p.Again, id)
		p.Carried[id] = res.Budget.Carried()
		return nil
	}
	p.Kept[id] = *res
	return nil
}

// cutOff books a run that closed without a result: it runs again, and a
// closed run still answers its status query (by replay): the agent time
// past its last checkpoint was lost.
func (p *Plan) cutOff(ctx context.Context, src Source, l Listed) {
	p.Again = append(p.Again, l.ID)
	st, err := src.Reached(ctx, l.ID, l.Close)
	if err != nil {
		p.Uncarried[l.ID] = err
		return
	}
	carried := st.Budget.Carried()
	if !l.Close.IsZero() {
		carried.LostS += st.Budget.LostAt(st.AgentS)
	}
	p.Carried[l.ID] = carried
}

// Entries is the plan as the resumed benchmark reads it.
func (p *Plan) Entries() Entries {
	plan := Entries{}
	for id, res := range p.Kept {
		plan[id] = Entry{Outcome: string(res.Outcome)}
	}
	for id, l := range p.Carried {
		plan[id] = Entry{Carried: &l}
	}
	return plan
}

// UncarriedIDs lists the runs whose lost time is not carried over, sorted.
func (p *Plan) UncarriedIDs() []string {
	ids := make([]string, 0, len(p.Uncarried))
	for id := range p.Uncarried {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
