package llm

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

// TestCheckRequestCostsNoCopy (audit H2): a 32 MiB body is checked in
// place, no copy of it and no string of its content made, and is left as
// it was (escapes and all).
func TestCheckRequestCostsNoCopy(t *testing.T) {
	content := strings.Repeat(`abc\"\u00e9`, (32<<20)/12)
	body := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"` + content + `"}],"k\u00e9y":1}`)
	orig := bytes.Clone(body)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := CheckRequest(body); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Fatalf("checking a %d MiB body allocated %d KiB", len(body)>>20, n>>10)
	}
	if !bytes.Equal(body, orig) {
		t.Fatal("the body changed as it was checked")
	}
}
