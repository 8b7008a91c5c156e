// Scripts: the files a command line names, read from the run's checkpoints, for evaluates_itself (python3 e.py where e.py imports lm_eval).

package review

import (
	"path"
	"slices"
	"strings"

	"github.com/mlrb/mlrb/internal/store/checkpoint"
)

// Bounds of the scripts read: their size and how many a run's review reads.
const (
	maxScriptBytes = 1 << 20
	maxScripts     = 64
)

// scriptExts are the files a command line runs as a program's source.
var scriptExts = []string{".py", ".sh", ".bash", ".ipynb"}

// scriptNames are the words of a command line that name a script.
func scriptNames(command string) []string {
	var out []string
	for _, w := range strings.Fields(command) {
		if slices.Contains(scriptExts, path.Ext(w)) {
			out = append(out, strings.TrimPrefix(path.Clean(w), "/"))
		}
	}
	return out
}

// scripts reads what a run's checkpoints held under a script's name,
// the latest checkpoint first, at most maxScripts of them over the run:
// a path that ends with the name as written (the process's directory
// is not known).
type scripts struct {
	in   Input
	read map[string][]byte
}

func newScripts(in Input) *scripts { return &scripts{in: in, read: map[string][]byte{}} }

// names says which of words a script named by command holds, and its path.
func (s *scripts) names(command string, words []string) (string, string) {
	if s.in.ReadFile == nil {
		return "", ""
	}
	for _, name := range scriptNames(command) {
		for _, m := range s.manifests() {
			for _, f := range m.Files {
				if !f.Mode.IsRegular() || f.Size > maxScriptBytes || (f.Path != name && !strings.HasSuffix(f.Path, "/"+name)) {
					continue
				}
				body, ok := s.read[f.Path]
				if !ok {
					if len(s.read) >= maxScripts {
						return "", ""
					}
					body, _ = s.in.ReadFile(m, f.Path, maxScriptBytes)
					s.read[f.Path] = body
				}
				for _, w := range words {
					if strings.Contains(string(body), w) {
						return w, f.Path
					}
				}
			}
		}
	}
	return "", ""
}

func (s *scripts) manifests() []*checkpoint.Manifest {
	var out []*checkpoint.Manifest
	if s.in.Final != nil {
		out = append(out, s.in.Final)
	}
	for i := len(s.in.Earlier) - 1; i >= 0; i-- {
		out = append(out, s.in.Earlier[i])
	}
	return out
}
