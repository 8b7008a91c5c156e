package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Write makes a safetensors file with the given tensors; the data section
// is sparse, so a file of any size costs no disk.
func write(t *testing.T, path string, tensors map[string]Tensor, dataBytes int64) {
	t.Helper()
	table := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	for k, v := range tensors {
		table[k] = v
	}
	hdr, err := json.Marshal(table)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if err := binary.Write(f, binary.LittleEndian, uint64(len(hdr))); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(hdr); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(8 + int64(len(hdr)) + dataBytes); err != nil {
		t.Fatal(err)
	}
}

func TestSummaryAndDTypes(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "model-00001-of-00002.safetensors"), map[string]Tensor{
		"embed.weight": {DType: "F16", Shape: []int64{1000, 64}, DataOffsets: [2]int64{0, 128000}},
		"norm.weight":  {DType: "F32", Shape: []int64{64}, DataOffsets: [2]int64{128000, 128256}},
	}, 128256)
	write(t, filepath.Join(dir, "model-00002-of-00002.safetensors"), map[string]Tensor{
		"lm_head.weight": {DType: "I8", Shape: []int64{1000, 64}, DataOffsets: [2]int64{0, 64000}},
	}, 64000)
	index(t, dir, map[string]string{"embed.weight": "model-00001-of-00002.safetensors", "norm.weight": "model-00001-of-00002.safetensors",
		"lm_head.weight": "model-00002-of-00002.safetensors"})
	s, err := Summarise(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Files != 2 || s.Params != 64000+64+64000 || s.Bytes != 128000+256+64000 {
		t.Fatalf("summary = %+v", s)
	}
	if s.DTypes["int8"] != 64000 || s.DTypes["float16"] != 64000 || s.DTypes["float32"] != 64 {
		t.Fatalf("dtypes = %v", s.DTypes)
	}
}

func index(t *testing.T, dir string, weightMap map[string]string) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 0}, "weight_map": weightMap})
	if err := os.WriteFile(filepath.Join(dir, IndexFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestOnlyTheLoadedWeightsCount is audit #4: the checks summed every
// .safetensors file under the model dir, so a 4-byte decoy beside the
// real weights passed any limit. They read exactly what transformers
// loads with use_safetensors=True; pickles are refused, never summed.
func TestOnlyTheLoadedWeightsCount(t *testing.T) {
	big := map[string]Tensor{"w": {DType: "F32", Shape: []int64{5_000_000}, DataOffsets: [2]int64{0, 20_000_000}}}
	decoy := map[string]Tensor{"d": {DType: "F16", Shape: []int64{2}, DataOffsets: [2]int64{0, 4}}}

	dir := t.TempDir() // the real weights as model.safetensors, a decoy beside
	write(t, filepath.Join(dir, SingleFile), big, 20_000_000)
	write(t, filepath.Join(dir, "decoy.safetensors"), decoy, 4)
	if s, err := Summarise(dir); err != nil || s.Params != 5_000_000 || s.DTypes["float16"] != 0 {
		t.Fatalf("decoy beside model.safetensors: %+v, %v", s, err)
	}

	dir = t.TempDir() // sharded: only the index's shards, not the decoy
	write(t, filepath.Join(dir, "a.safetensors"), big, 20_000_000)
	write(t, filepath.Join(dir, "decoy.safetensors"), decoy, 4)
	index(t, dir, map[string]string{"w": "a.safetensors"})
	if s, err := Summarise(dir); err != nil || s.Params != 5_000_000 || s.Files != 1 {
		t.Fatalf("decoy beside the shards: %+v, %v", s, err)
	}
	index(t, dir, map[string]string{"w": "../outside.safetensors"})
	if _, err := Summarise(dir); err == nil || !strings.Contains(err.Error(), "not a .safetensors file of the model directory") {
		t.Fatalf("an index naming a file outside: %v", err)
	}

	dir = t.TempDir() // the audit's: pytorch_model.bin with a decoy
	if err := os.WriteFile(filepath.Join(dir, "pytorch_model.bin"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "decoy.safetensors"), decoy, 4)
	if s, err := Summarise(dir); !errors.Is(err, ErrPickled) {
		t.Fatalf("pickled weights with a decoy: %+v, %v; want refused", s, err)
	}

	dir = t.TempDir() // model.safetensors as a link to weights elsewhere
	write(t, filepath.Join(dir, "real"), big, 20_000_000)
	if err := os.Symlink("real", filepath.Join(dir, SingleFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := Summarise(dir); err == nil {
		t.Fatal("model.safetensors as a symlink was read")
	}
}

func TestLargeSparseModel(t *testing.T) {
	dir := t.TempDir()
	// 600M float16 parameters: 1.2 GB of weights.
	write(t, filepath.Join(dir, "model.safetensors"), map[string]Tensor{
		"w": {DType: "F16", Shape: []int64{600_000, 1000}, DataOffsets: [2]int64{0, 1_200_000_000}},
	}, 1_200_000_000)
	s, err := Summarise(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Bytes != 1_200_000_000 || s.Params != 600_000_000 {
		t.Fatalf("summary = %+v", s)
	}
}

func TestBadHeaders(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]struct {
		tensors map[string]Tensor
		data    int64
		want    string
	}{
		"offsets past the data": {map[string]Tensor{"w": {DType: "F32", Shape: []int64{10}, DataOffsets: [2]int64{0, 40}}}, 20, "do not hold"},
		"size mismatch":         {map[string]Tensor{"w": {DType: "F32", Shape: []int64{10}, DataOffsets: [2]int64{0, 30}}}, 40, "do not hold"},
		"unknown dtype":         {map[string]Tensor{"w": {DType: "Q4", Shape: []int64{10}, DataOffsets: [2]int64{0, 5}}}, 5, "unknown dtype"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".safetensors")
			write(t, p, tc.tensors, tc.data)
			if _, err := readFile(p); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	junk := filepath.Join(dir, "junk.safetensors")
	if err := os.WriteFile(junk, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, '{'}, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readFile(junk); err == nil || !strings.Contains(err.Error(), "does not fit") {
		t.Fatalf("err = %v", err)
	}
	if _, err := Summarise(t.TempDir()); !errors.Is(err, ErrNoFiles) {
		t.Fatalf("empty dir: %v", err)
	}
}

// readFile opens p and reads its header, as Summarise does with the files
// it resolves.
func readFile(p string) (*Header, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return ReadHeader(f, p)
}
