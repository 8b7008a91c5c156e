package app

import "testing"

// TestBuildChecksum: a build with a name (a module version, a clean
// commit) is recorded under it; one its bytes alone tell apart keeps the
// SDK's hash of the executable.
func TestBuildChecksum(t *testing.T) {
	for v, want := range map[string]string{
		"v1.4.0":             "mlrb@v1.4.0",
		"e5a3b5c1d2e3":       "mlrb@e5a3b5c1d2e3",
		"e5a3b5c1d2e3+dirty": "",
		"devel":              "",
		"unknown":            "",
	} {
		got, ok := buildChecksum(v)
		if got != want || ok != (want != "") {
			t.Errorf("buildChecksum(%q) = %q, %v; want %q", v, got, ok, want)
		}
	}
}
