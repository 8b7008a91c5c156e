// Package scoring is a wing of internal/: a model scored. model and
// safetensors (the model an agent left and its rules), lmeval (an
// evaluator's results and the task's score), evaldata (the data sets an
// evaluator reads, checked against their hashes) and reference (the
// mini tasks' reference agent and evaluator). It stands on floor 4.
package scoring
