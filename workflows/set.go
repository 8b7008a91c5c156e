// Set is a worker's activities by concern, each receiver holding only what its activities use.

package workflows

import (
	"github.com/mlrb/mlrb/activities/attempt"
	"github.com/mlrb/mlrb/activities/evaluation"
	"github.com/mlrb/mlrb/activities/host"
	"github.com/mlrb/mlrb/activities/records"
)

// Set is a worker's activities by concern, each receiver holding only
// what its activities use: Tasks resolve tasks and agents, Records keep
// what runs leave in the store, Leases hand out this host's GPU slots,
// Fleet obtains hosts, and Attempts and Evaluations run agents and
// evaluators in the host's Sandbox they share. The catalogue in workflows
// names each activity by its receiver's method.
type Set struct {
	Tasks       *records.Tasks
	Records     *records.Records
	Leases      *host.Leases
	Fleet       *records.Fleet
	Attempts    *attempt.Attempts
	Evaluations *evaluation.Evaluations
}
