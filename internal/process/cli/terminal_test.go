package cli

import "testing"

// TestPrintable is audit #22: agent bytes reached the operator's terminal
// raw, escape sequences included.
func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"plain line\n\tindented":    "plain line\n\tindented",
		"\x1b]0;pwned\x07title":     `\x1b]0;pwned\x07title`,
		"clear\x1b[2J\x1b[H screen": `clear\x1b[2J\x1b[H screen`,
		"c1 \u009b31m":              `c1 \x9b31m`,
	} {
		if got := Printable(in); got != want {
			t.Errorf("Printable(%q) = %q, want %q", in, got, want)
		}
	}
}
