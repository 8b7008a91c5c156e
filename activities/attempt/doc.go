// The attempt package's doc: one attempt of an agent at a task, end to end.

// Package attempt runs an agent: RunAgent prepares the attempt's
// workspace (restored from its checkpoint), starts the agent behind its
// door, supervises it (heartbeats, deadlines, checkpoints, steering, a
// person's clock) and concludes it with a final checkpoint. It stands on
// the wire (activities) and host; it imports neither the evaluation nor
// the records.
package attempt
