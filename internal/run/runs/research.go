// A run's research measures at a glance.

package runs

// Measures are a run's research at a glance.
type Measures struct {
	Experiments int `json:"experiments"`
	// ByOutcome counts experiments by how they ended (observe.Outcome).
	ByOutcome map[string]int `json:"by_outcome,omitempty"`
	// PerHour is experiments per hour of agent time.
	PerHour float64 `json:"per_hour"`
	// GPUBusyShare is the leased devices' mean utilisation over the
	// budget (nil: no GPU was sampled).
	GPUBusyShare *float64 `json:"gpu_busy_share,omitempty"`
	// FirstModelS is the agent time of the first checkpoint holding a
	// model (nil: none did).
	FirstModelS *float64 `json:"first_model_s,omitempty"`
	// LongestStallS is the longest agent time with no experiment running
	// and no LLM call in flight.
	LongestStallS float64 `json:"longest_stall_s"`
	GPUHours      float64 `json:"gpu_hours"`
	// GPUHoursNoModel is spent in experiments after which no model came.
	GPUHoursNoModel float64 `json:"gpu_hours_no_model"`
	// CutOffHours is the time experiments cut off by the deadline had run.
	CutOffHours float64 `json:"cut_off_hours"`
}

// FinalSeq is the checkpoint the run's final evaluation scored: the last
// final one it accepted (0: none).
func (r *Result) FinalSeq() int {
	seq := 0
	for _, c := range r.CheckpointLog {
		if c.Final && c.Seq > seq {
			seq = c.Seq
		}
	}
	return seq
}
