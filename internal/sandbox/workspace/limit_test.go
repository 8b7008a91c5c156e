package workspace

import (
	"testing"

	"github.com/mlrb/mlrb/tasks"
)

// TestTaskDiskReplacesTheWorkspaceLimit: a task that states its disk
// (MLRB's 500 GB) gets it, whatever agent.workspace_limit_gb says; one
// that states none gets the key's limit, and the agent is told which.
func TestTaskDiskReplacesTheWorkspaceLimit(t *testing.T) {
	cat, err := tasks.Load("")
	if err != nil {
		t.Fatal(err)
	}
	s := &Sandbox{WorkspaceLimit: 100 << 30, WorkspaceEntries: 7}
	eff, _ := cat.Get("llm_efficiency")
	if l := s.WorkspaceLimits(eff); l.Bytes != 500<<30 || l.Entries != 7 || l.bytesFrom != "the task's resources.disk_gb" {
		t.Fatalf("llm_efficiency: %+v", l)
	}
	mini, _ := cat.Get("mini_baby_lm")
	if l := s.WorkspaceLimits(mini); l.Bytes != 100<<30 || l.bytesFrom != "agent.workspace_limit_gb" {
		t.Fatalf("mini_baby_lm: %+v", l)
	}
}
