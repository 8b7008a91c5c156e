package reference

import "math/rand/v2"

// What the reference agent (agents/reference) reads of the mini tasks'
// worlds to build its models, without the held-out data: outside the
// evaluator's name, as it scores nothing.

// NounCount is how many singular nouns the language has: the agent's
// base model of a task that starts from one sees the first 60 % of them.
func (l *Language) NounCount() int { return len(l.nounsSg) }

// Stream is the seeded random stream of a purpose, as the evaluator's.
func Stream(seed uint64, purpose string) *rand.Rand { return stream(seed, purpose) }
