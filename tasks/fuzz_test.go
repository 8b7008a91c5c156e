package tasks

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse: any task file is parsed and validated, or refused with an
// error; never a panic, and a parsed spec renders its prompt.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("catalog", "*.yaml"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("id: x\ntime_limit: -5h\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, err := Parse(raw)
		if err != nil {
			return
		}
		_ = s.Hash()
		_, _ = s.RenderPrompt()
	})
}
