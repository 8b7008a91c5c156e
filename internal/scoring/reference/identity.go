// The reference evaluator's name: its subcommand and its scoring code's hash.

package reference

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"strings"
	"sync"
)

// EvalCommand is the subcommand that runs Evaluate (mlrb-agent's, and
// the worker's own when it runs tasks as processes: {self}).
const EvalCommand = "reference-eval"

// scoring is the code that makes a mini task's score: its data, its
// models and the scoring itself (agent.go only searches).
//
//go:embed eval.go arith.go lang.go ngram.go
var scoring embed.FS

// Evaluator names this build's reference evaluator by the hash of its
// scoring code, not of the binary that holds it: a build of anything
// else (the worker, the starter, a new Go) leaves the name alone, so an
// anchor measured by one build compares with the runs another scores,
// and any edit to the scoring names a new evaluator. Import declarations
// are left out: where a package lives in the module is not scoring, and
// moving one must not make every anchor measured before it a stranger.
var Evaluator = sync.OnceValue(func() string {
	h := sha256.New()
	// ReadDir lists in name order: the hash does not depend on the walk.
	ents, err := fs.ReadDir(scoring, ".")
	if err != nil {
		panic("reference: the embedded scoring code: " + err.Error())
	}
	for _, e := range ents {
		b, err := scoring.ReadFile(e.Name())
		if err != nil {
			panic("reference: the embedded scoring code: " + err.Error())
		}
		h.Write([]byte(e.Name()))
		h.Write([]byte{0})
		h.Write(withoutImports(b))
		h.Write([]byte{0})
	}
	return evaluatorPrefix + hex.EncodeToString(h.Sum(nil))
})

// withoutImports is a Go file without its import declarations.
func withoutImports(src []byte) []byte {
	var out []string
	in := false
	for _, line := range strings.Split(string(src), "\n") {
		switch {
		case in:
			in = strings.TrimSpace(line) != ")"
		case strings.HasPrefix(line, "import ("):
			in = true
		case strings.HasPrefix(line, "import "):
		default:
			out = append(out, line)
		}
	}
	return []byte(strings.Join(out, "\n"))
}

// evaluatorPrefix starts every name Evaluator gives.
const evaluatorPrefix = "builtin " + EvalCommand + " sha256:"

// IsEvaluatorName tells whether s is a name Evaluator gives (of any
// build): what a binary answers to `reference-eval --name` is taken as
// its evaluator's name only if it is one.
func IsEvaluatorName(s string) bool {
	h, ok := strings.CutPrefix(s, evaluatorPrefix)
	if !ok || len(h) != 2*sha256.Size {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}
