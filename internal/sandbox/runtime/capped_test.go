package runtime

import (
	"bytes"
	"strings"
	"testing"
)

func TestCappedOutput(t *testing.T) {
	var b bytes.Buffer
	w := Capped(&b, 10)
	for _, s := range []string{"12345", "6789", "abcdef", "more and more"} {
		if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("write %q: %d, %v", s, n, err)
		}
	}
	if got := b.String(); !strings.HasPrefix(got, "123456789a\n[mlrb: output past 10 bytes is dropped") || strings.Contains(got, "more") {
		t.Fatalf("capped output %q", got)
	}
	if Capped(&b, 0) != &b {
		t.Fatal("no limit must pass through")
	}
}
