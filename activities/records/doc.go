// The records package's doc: tasks resolved, hosts obtained, and what runs leave in the store.

// Package records holds the activities around the runs: tasks and agents
// resolved (Tasks), hosts obtained from a provider (Fleet), results,
// anchors, leaderboards and resume plans kept in the store (Records). It
// stands on the wire (activities); it imports neither the attempt nor
// the evaluation.
package records
