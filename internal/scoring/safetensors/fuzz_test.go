package safetensors

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// FuzzReadHeader: any file is read as a safetensors header or refused;
// never a panic, and never more memory than the header bound.
func FuzzReadHeader(f *testing.F) {
	h := []byte(`{"w":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]},"__metadata__":{"format":"pt"}}`)
	f.Add(append(append(binary.LittleEndian.AppendUint64(nil, uint64(len(h))), h...), make([]byte, 8)...))
	f.Add(binary.LittleEndian.AppendUint64(nil, 1<<62))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(t.TempDir(), "model.safetensors")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		hd, err := readFile(p)
		if err != nil {
			return
		}
		for _, tn := range hd.Tensors {
			if tn.Elements() < 0 {
				t.Fatalf("a tensor with a negative size was accepted: %+v", tn)
			}
		}
	})
}
