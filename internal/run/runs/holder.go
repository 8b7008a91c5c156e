// Holder: whom a lease or a provisioned host belongs to.

package runs

import (
	"fmt"
	"strings"
)

// RoleEvaluation is the role of an evaluation's lease or host; an
// agent's attempt has none.
const RoleEvaluation = "evaluation"

// RoleCurve is the role of the lease or host a run's curve is scored on
// (N counts the rounds: the first, then each retry-curve).
const RoleCurve = "curve"

// Holder is whom a GPU lease or a provisioned host serves: attempt N of a
// run's agent (Role ""), or its Nth evaluation (RoleEvaluation).
type Holder struct {
	RunID string
	Role  string
	N     int
}

// Token is the holder as lease tables store it: run#N for an attempt,
// run#evaluationN for an evaluation. The format is on disk and in histories:
// never change it.
func (h Holder) Token() string { return fmt.Sprintf("%s#%s%d", h.RunID, h.Role, h.N) }

// JobKey is the holder's run as job names and instance tags carry it,
// with the number apart: run for an attempt's host, run#evaluation for an
// evaluation's (whose number is not an attempt's).
func (h Holder) JobKey() string {
	if h.Role == "" {
		return h.RunID
	}
	return h.RunID + "#" + h.Role
}

// ParseJobKey is JobKey backwards, with the number n from the job's name.
func ParseJobKey(key string, n int) Holder {
	runID, role, _ := strings.Cut(key, "#")
	return Holder{RunID: runID, Role: role, N: n}
}
