// Untrained saves a mini task's untrained model in dir.

package reference

import "github.com/mlrb/mlrb/tasks"

// Untrained saves a mini task's untrained model in dir: what the no-op
// agent submits, and the control model a worker scores to tell a broken
// evaluator from a model that breaks it.
func Untrained(spec *tasks.Spec, dir string) error {
	if spec.Reference != nil && spec.Reference.Kind == "translate" {
		return (&Lexicon{Map: map[string]string{}}).Save(dir)
	}
	return Train(nil, 1, 0.5).Save(dir)
}
