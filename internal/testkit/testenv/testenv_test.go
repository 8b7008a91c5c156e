package testenv

import (
	"fmt"
	"testing"
)

type fakeT struct{ fatal, skip string }

func (f *fakeT) Helper()                        {}
func (f *fakeT) Fatalf(format string, a ...any) { f.fatal = fmt.Sprintf(format, a...) }
func (f *fakeT) Skip(a ...any)                  { f.skip = fmt.Sprint(a...) }

// TestMissingFailsUnderCI: a missing tool skips on a laptop and fails in CI.
func TestMissingFailsUnderCI(t *testing.T) {
	t.Setenv("CI", "")
	var laptop fakeT
	Tool(&laptop, "mlrb-no-such-tool", "nowhere")
	if laptop.skip == "" || laptop.fatal != "" {
		t.Fatalf("without CI: skip %q, fatal %q; want a skip", laptop.skip, laptop.fatal)
	}
	t.Setenv("CI", "1")
	var ci fakeT
	Tool(&ci, "mlrb-no-such-tool", "nowhere")
	if ci.fatal == "" || ci.skip != "" {
		t.Fatalf("with CI: skip %q, fatal %q; want a failure", ci.skip, ci.fatal)
	}
	if p := Tool(t, "go", "https://go.dev/dl"); p == "" {
		t.Fatal("go is on PATH")
	}
}
