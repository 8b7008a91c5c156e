// What the agents read of the mini tasks' worlds.

package reference

import "math/rand/v2"

// What the reference agent (agents/reference) reads of the mini tasks'
// worlds to build its models, without the held-out data, and the files
// it shares with the models: outside the evaluator's name, as it scores
// nothing.

// NounCount is how many singular nouns the language has: the agent's
// base model of a task that starts from one sees the first 60 % of them.
func (l *Language) NounCount() int { return len(l.nounsSg) }

// Stream is the seeded random stream of a purpose, as the evaluator's.
func Stream(seed uint64, purpose string) *rand.Rand { return stream(seed, purpose) }

// WriteJSON replaces path with v's JSON whole (written beside it, then
// renamed), as the models are saved: a checkpoint sees the old or the new.
func WriteJSON(path string, v any) error { return writeJSON(path, v) }

// ReadJSON reads path's JSON into v, naming the file on a bad one.
func ReadJSON(path string, v any) error { return readJSON(path, v) }
