// The evaluation package's doc: a model scored, from its checkpoint to its result.

// Package evaluation scores the model a run made: Evaluate restores the
// final checkpoint, finds and checks the model, runs the task's
// evaluator in its sandbox (and its control when it fails), checks
// outputs that are code, and reads the results; PickMarks chooses the
// checkpoints a curve scores. It stands on the wire (activities) and
// host; it imports neither the attempt nor the records.
package evaluation
