// Experiments and their outcomes, derived from observations.

package observe

import (
	"sort"
	"time"

	"github.com/mlrb/mlrb/internal/run/runs"
)

// Outcome is how an experiment ended.
type Outcome string

const (
	Ended     Outcome = "ended"
	OOMKilled Outcome = "oom_killed"
	// CutOff: running when the agent's time (or LLM budget) ran out.
	CutOff Outcome = "cut_off"
	// Lost: running when the attempt was lost to an infra failure.
	Lost     Outcome = "lost"
	Canceled Outcome = "canceled"
)

// Experiment is a process the agent ran that lasted at least the
// minimum or touched a GPU: the outermost such process of its tree,
// unless that one only ran others one after another (a shell the agent
// keeps, a driver script), when each of those is one.
type Experiment struct {
	Attempt int       `json:"attempt"`
	PID     int       `json:"pid"`
	Command string    `json:"command"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	// StartS and EndS are in the run's agent time.
	StartS   float64  `json:"start_agent_s"`
	EndS     float64  `json:"end_agent_s"`
	CPUS     float64  `json:"cpu_s"`
	PeakRSS  int64    `json:"peak_rss"`
	GPUMiB   float64  `json:"gpu_mib,omitempty"`
	GPUHours float64  `json:"gpu_hours"`
	MeanUtil *float64 `json:"mean_gpu_util,omitempty"`
	Outcome  Outcome  `json:"outcome"`
	// Model is what the next checkpoint begun after it ended added, if it
	// added one.
	Model *ModelRef `json:"model,omitempty"`
	// gone is when it was known to have ended (first seen gone): a
	// checkpoint begun before may have missed what it wrote last.
	gone time.Time
}

// ModelRef is a model a checkpoint holds, and its score where a mark (or
// the final evaluation) fell on that checkpoint.
type ModelRef struct {
	Checkpoint int      `json:"checkpoint"`
	Path       string   `json:"path"`
	Score      *float64 `json:"score,omitempty"`
	// Split is the held-out split Score is on (a mark's dev split, or
	// the final evaluation's test split).
	Split string `json:"split,omitempty"`
}

// Scored is a checkpoint's score and the split it is on.
type Scored struct {
	Score float64
	Split string
}

// Research is a run's experiments and its measures.
type Research struct {
	Experiments []Experiment  `json:"experiments"`
	Measures    runs.Measures `json:"measures"`
}

// Span is a stretch of wall time (an LLM call).
type Span struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// USD is what the call cost, as the gateway metered it.
	USD float64 `json:"usd,omitempty"`
}

// Input is what a run's research is derived from.
type Input struct {
	Observations []*Observation
	// Scores are the scored checkpoints', by sequence number.
	Scores        map[int]Scored
	MinExperiment time.Duration
	// BudgetS is the run's agent time limit; AgentS the agent time it used.
	BudgetS, AgentS float64
}

// DefaultMinExperiment is observe.min_experiment's default.
const DefaultMinExperiment = time.Minute

// Derive finds a run's experiments in its observations and measures them.
func Derive(in Input) Research {
	if in.MinExperiment <= 0 {
		in.MinExperiment = DefaultMinExperiment
	}
	r := Research{Experiments: []Experiment{}}
	var busy [][2]float64
	var gpuBusyS, gpuSpanS float64
	sampled := false
	adds := allAdds(in.Observations, in.Scores)
	for _, o := range in.Observations {
		for _, e := range experiments(o, in.MinExperiment) {
			e.Model = nextModel(o, e.gone, adds, in.Scores)
			r.Experiments = append(r.Experiments, e)
			busy = append(busy, [2]float64{e.StartS, e.EndS})
		}
		for _, c := range o.Calls {
			busy = append(busy, [2]float64{o.AgentAt(c.Start), o.AgentAt(c.End)})
		}
		if b, ok := o.gpuBusy(); ok {
			sampled = true
			gpuBusyS += b
			gpuSpanS += o.End.Sub(o.Start).Seconds() * float64(len(o.Devices))
		}
		for _, c := range o.Checkpoints {
			if len(c.Models) > 0 && (r.Measures.FirstModelS == nil || c.AgentS < *r.Measures.FirstModelS) {
				s := c.AgentS
				r.Measures.FirstModelS = &s
			}
		}
	}
	sort.SliceStable(r.Experiments, func(i, j int) bool { return r.Experiments[i].StartS < r.Experiments[j].StartS })
	m := &r.Measures
	m.Experiments = len(r.Experiments)
	m.ByOutcome = map[string]int{}
	for _, e := range r.Experiments {
		m.ByOutcome[string(e.Outcome)]++
		m.GPUHours += e.GPUHours
		if e.Model == nil {
			m.GPUHoursNoModel += e.GPUHours
		}
		if e.Outcome == CutOff {
			m.CutOffHours += (e.EndS - e.StartS) / 3600
		}
	}
	if in.AgentS > 0 {
		m.PerHour = float64(m.Experiments) / (in.AgentS / 3600)
	}
	if sampled && in.BudgetS > 0 && gpuSpanS > 0 {
		// Busy time over the budget's device time; the devices count as
		// those sampled (the lease's).
		devS := in.BudgetS * gpuSpanS / totalSpan(in.Observations)
		share := gpuBusyS / devS
		m.GPUBusyShare = &share
	}
	m.LongestStallS = longestGap(busy, in.AgentS)
	return r
}

// experiments picks o's experiments (see Experiment).
func experiments(o *Observation, minimum time.Duration) []Experiment {
	cand := map[int]bool{}
	byPID := map[int]int{}
	for i, p := range o.Procs {
		byPID[p.PID] = i
		if !p.Root && (o.endOf(p).Sub(p.Start) >= minimum || p.GPUMiB > 0) {
			cand[i] = true
		}
	}
	// up is each candidate's nearest candidate ancestor (-1: none).
	up := map[int]int{}
	kids := map[int][]int{}
	for i := range cand {
		a := -1
		for p, hops := o.Procs[i].PPID, 0; hops < len(o.Procs); hops++ {
			j, ok := byPID[p]
			if !ok || o.Procs[j].Root {
				break
			}
			if cand[j] {
				a = j
				break
			}
			p = o.Procs[j].PPID
		}
		up[i] = a
		if a >= 0 {
			kids[a] = append(kids[a], i)
		}
	}
	session := map[int]bool{} // a parent that ran two of its children one after the other
	for i, ks := range kids {
		session[i] = sequential(o, ks)
	}
	var out []Experiment
	for i := range cand {
		if session[i] {
			continue
		}
		inside := false
		for a := up[i]; a >= 0; a = up[a] {
			if !session[a] {
				inside = true
				break
			}
		}
		if !inside {
			out = append(out, o.experiment(o.Procs[i]))
		}
	}
	return out
}

// sequential tells whether some two of the processes ran one after the
// other: their parent drove them, it is no experiment of its own.
func sequential(o *Observation, ps []int) bool {
	for a := range ps {
		for b := range ps {
			pa, pb := o.Procs[ps[a]], o.Procs[ps[b]]
			if a != b && !o.endOf(pa).After(pb.Start) {
				return true
			}
		}
	}
	return false
}

func (o *Observation) experiment(p Proc) Experiment {
	end := o.endOf(p)
	e := Experiment{Attempt: o.Attempt, PID: p.PID, Command: p.Command, Start: p.Start, End: end, StartS: o.AgentAt(p.Start), EndS: o.AgentAt(end),
		CPUS: p.CPUS, PeakRSS: p.PeakRSS, GPUMiB: p.GPUMiB, Outcome: o.outcome(p), gone: end}
	if !p.Gone.IsZero() {
		e.gone = p.Gone
	}
	if u, ok := o.meanUtil(p.Start, end); ok {
		e.MeanUtil = &u
	}
	if p.GPUMiB > 0 || e.MeanUtil != nil && *e.MeanUtil >= 1 && !o.appsReported() {
		e.GPUHours = end.Sub(p.Start).Hours() * float64(len(o.Devices))
	}
	return e
}

// outcome: OOM-killed; else alive when the harness stopped the agent
// (cut off by its deadline or LLM budget, canceled, or lost with a
// handed-back attempt) or at the last sample of an attempt that never
// ended (its worker lost); else ended.
func (o *Observation) outcome(p Proc) Outcome {
	switch {
	case p.OOMKilled:
		return OOMKilled
	case p.End.IsZero() && o.Ended == "":
		return Lost
	case !o.StopAt.IsZero() && (p.End.IsZero() || !p.End.Before(o.StopAt)):
		switch o.Ended {
		case "canceled":
			return Canceled
		case "deadline", "llm_budget":
			return CutOff
		}
		return Lost
	}
	return Ended
}

func (o *Observation) endOf(p Proc) time.Time {
	if p.End.IsZero() {
		return o.End
	}
	return p.End
}

// AgentAt is the run's agent time at wall time t of this attempt.
func (o *Observation) AgentAt(t time.Time) float64 {
	return o.StartAgentS + t.Sub(o.Start).Seconds()
}

// meanUtil is the devices' mean utilisation over [from, to].
func (o *Observation) meanUtil(from, to time.Time) (float64, bool) {
	var sum float64
	n := 0
	for _, s := range o.GPU {
		if !s.At.Before(from) && !s.At.After(to) {
			sum += s.Util
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}

// appsReported: the driver named processes on the devices at least once.
func (o *Observation) appsReported() bool {
	for _, p := range o.Procs {
		if p.GPUMiB > 0 {
			return true
		}
	}
	return false
}

// gpuBusy is the device-seconds the leased devices were busy over the
// attempt: each device's mean utilisation times the attempt's span.
func (o *Observation) gpuBusy() (float64, bool) {
	if len(o.GPU) == 0 {
		return 0, false
	}
	sum := map[int]float64{}
	n := map[int]int{}
	for _, s := range o.GPU {
		sum[s.Index] += s.Util
		n[s.Index]++
	}
	span := o.End.Sub(o.Start).Seconds()
	var busy float64
	for d := range sum {
		busy += sum[d] / float64(n[d]) / 100 * span
	}
	return busy, true
}

func totalSpan(obs []*Observation) float64 {
	var s float64
	for _, o := range obs {
		if len(o.GPU) > 0 {
			s += o.End.Sub(o.Start).Seconds()
		}
	}
	return s
}

// longestGap is the longest stretch of [0, total] no interval covers.
func longestGap(iv [][2]float64, total float64) float64 {
	sort.Slice(iv, func(i, j int) bool { return iv[i][0] < iv[j][0] })
	longest, at := 0.0, 0.0
	for _, x := range iv {
		if x[0] > at {
			longest = max(longest, x[0]-at)
		}
		at = max(at, x[1])
	}
	if total > at {
		longest = max(longest, total-at)
	}
	return longest
}
