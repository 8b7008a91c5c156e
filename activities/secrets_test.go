package activities

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
)

// A malformed line of agent.env_file is named by its number, never shown:
// the error goes into the run's history and logs.
func TestEnvFileErrorHidesTheLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.env")
	if err := os.WriteFile(path, []byte("OPENAI_API_KEY=sk-fine\nsk-live-SECRETVALUE oops\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := &Activities{EnvFile: path, Logger: zap.NewNop()}
	_, err := a.secretValues([]string{"OPENAI_API_KEY"})
	if err == nil || strings.Contains(err.Error(), "SECRETVALUE") || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("err = %v; want line 2 named and its text left out", err)
	}
}
