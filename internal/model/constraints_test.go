package model

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlrb/mlrb/tasks"
)

func safetensorsFile(t *testing.T, dir string, dtype string, rows, cols, elemSize int64) {
	t.Helper()
	n := rows * cols * elemSize
	hdr, _ := json.Marshal(map[string]any{"w": map[string]any{"dtype": dtype, "shape": []int64{rows, cols}, "data_offsets": []int64{0, n}}})
	f, err := os.Create(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	_ = binary.Write(f, binary.LittleEndian, uint64(len(hdr)))
	_, _ = f.Write(hdr)
	if err := f.Truncate(8 + int64(len(hdr)) + n); err != nil {
		t.Fatal(err)
	}
}

func TestConstraintsOfEdgeTasks(t *testing.T) {
	cat, err := tasks.Load("")
	if err != nil {
		t.Fatal(err)
	}
	training, _ := cat.Get("edge_llm_training")
	compression, _ := cat.Get("edge_llm_compression")

	int8 := t.TempDir()
	safetensorsFile(t, int8, "I8", 1000, 1000, 1)
	if _, v, _ := CheckConstraints(int8, compression); len(v) != 1 || !strings.Contains(v[0], "are int8") {
		t.Fatalf("int8 weights for edge compression: %v", v)
	}

	big := t.TempDir()
	safetensorsFile(t, big, "F16", 600_000, 1000, 2) // 1.2 GB
	if _, v, _ := CheckConstraints(big, training); len(v) != 1 || !strings.Contains(v[0], "over the 1000000000 byte memory limit") {
		t.Fatalf("1.2 GB model for the 1 GB task: %v", v)
	}
	if params, v, _ := CheckConstraints(big, compression); len(v) != 0 || params != 600_000_000 {
		t.Fatalf("1.2 GB fp16 model for the 12 GB task: %d params, %v", params, v)
	}
}
