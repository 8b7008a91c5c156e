package runtime

import (
	"slices"
	"testing"
)

// TestOwnWrites: of a container's changes, only what its task wrote
// counts: not its mounts or the directories made for them, not Docker's
// own files, not a directory listed for what changed under it.
func TestOwnWrites(t *testing.T) {
	changed := []string{"/tmp", "/tmp/certagent", "/tmp/certagent/memory.txt", "/sbin", "/sbin/docker-init", "/root", "/root/.cache",
		"/etc", "/etc/hosts", "/etc/passwd", "/dev/shm/x", "/app"}
	skip := append([]string{"/app", "/root/.cache/huggingface"}, runtimeMade...)
	got := ownWrites(changed, skip)
	want := []string{"/dev/shm/x", "/etc/passwd", "/tmp/certagent/memory.txt"}
	if !slices.Equal(got, want) {
		t.Fatalf("own writes %v, want %v", got, want)
	}
}
