// Package scoring is a wing of internal/: from a model to a
// leaderboard. model and safetensors (the model an agent left and its
// rules), lmeval (an evaluator's results and the task's score), evaldata (the
// data sets an evaluator reads, checked against their hashes),
// reference (the mini tasks' agent and evaluator), anchors, review (a
// reviewer's flags and verdicts), leaderboard (rows, statistics,
// renderings), campaign (benchmarks pooled), results and runresults
// (the read side: a benchmark's board, each run's stored result and the
// one place it is completed) and resume (what a resumed benchmark keeps).
// It may import the run, store, sandbox and research wings.
package scoring
