// A finished run's result as `starter result` prints it.

package show

import (
	"fmt"
	"io"

	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// WriteResult is a finished run's result as `starter result` prints it.
func WriteResult(w io.Writer, r *runs.Result) {
	score := "—"
	if r.Score != nil {
		score = fmt.Sprintf("%.4f", *r.Score)
	}
	fmt.Fprintf(w, "run        %s\ntask       %s (agent %s, seed %d)\noutcome    %s\nscore      %s\n", r.RunID, r.Task, r.Agent, r.Seed, r.Outcome, score)
	if r.Reason != "" {
		fmt.Fprintf(w, "reason     %s\n", cli.Printable(r.Reason))
	}
	fmt.Fprintf(w, "attempts   %d\ncheckpoints %d\nbudget     granted %.0fs, used %.1fs, lost %.1fs (refunded), infra wait %.1fs\nspec       %s\n",
		r.Attempts, r.Checkpoints, r.Budget.GrantedS(), r.Budget.UsedS, r.Budget.LostS, r.Budget.InfraWaitS, r.SpecHash)
	for _, v := range r.Violations {
		fmt.Fprintf(w, "violation  %s\n", v)
	}
	WriteCurve(w, "curve      ", r.Curve)
	if m := r.Research; m != nil {
		fmt.Fprintf(w, "research   %d experiments (%.2f an hour), longest stall %s, %.2f GPU-hours in experiments (%.2f produced no model): `starter experiments %s`\n",
			m.Experiments, m.PerHour, AgentClock(m.LongestStallS), m.GPUHours, m.GPUHoursNoModel, r.RunID)
	}
}
