package app

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestBuildChecksum: a build with a name (a module version, a clean
// commit) is recorded under it; one without, under the name and its Go
// build ID; one with neither keeps the SDK's hash of the executable.
func TestBuildChecksum(t *testing.T) {
	for _, c := range []struct{ version, id, want string }{
		{"v1.4.0", "", "mlrb@v1.4.0"},
		{"e5a3b5c1d2e3", "abc/def", "mlrb@e5a3b5c1d2e3"},
		{"e5a3b5c1d2e3+dirty", "abc/def", "mlrb@e5a3b5c1d2e3+dirty/abc/def"},
		{"devel", "abc/def", "mlrb@devel/abc/def"},
		{"devel", "", ""},
		{"e5a3b5c1d2e3+dirty", "", ""},
	} {
		got, ok := buildChecksum(c.version, c.id)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("buildChecksum(%q, %q) = %q, %v; want %q", c.version, c.id, got, ok, c.want)
		}
	}
}

// TestGoBuildID: the build ID read from the running executable's note is
// the one the Go toolchain reports for it.
func TestGoBuildID(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "tool", "buildid", exe).Output()
	if err != nil {
		t.Fatalf("go tool buildid: %v", err)
	}
	if got, want := goBuildID(), strings.TrimSpace(string(out)); got == "" || got != want {
		t.Fatalf("goBuildID() = %q, want %q", got, want)
	}
}
