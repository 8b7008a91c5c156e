// The workspaces the checkpoint bench saves: safetensors weights and many small files.

package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
)

// The workspace the benchmark checkpoints: random files, weight-like
// tensors, and the changes of an agent between two checkpoints.

func writeRandom(p string, n int64, r *rand.Rand) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for left := n; left > 0; left -= int64(len(buf)) {
		for i := 0; i+8 <= len(buf); i += 8 {
			v := r.Uint64()
			for j := 0; j < 8; j++ {
				buf[i+j] = byte(v >> (8 * j))
			}
		}
		if _, err := f.Write(buf[:min(int64(len(buf)), left)]); err != nil {
			return err
		}
	}
	return f.Close()
}

// writeWeights writes a safetensors file of n bytes: one F16 tensor of
// random values behind a real header, so that the evaluation reads it.
func writeWeights(p, tensor string, n int64, r *rand.Rand) error {
	header := func(elems int64) []byte {
		return []byte(fmt.Sprintf(`{%q:{"dtype":"F16","shape":[%d],"data_offsets":[0,%d]}}`, tensor, elems, 2*elems))
	}
	elems := (n - 8 - int64(len(header(n)))) / 2
	h := header(elems)
	if err := writeRandom(p, 8+int64(len(h))+2*elems, r); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	prefix := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	if _, err := f.WriteAt(append(prefix, h...), 0); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// makeTree writes an MLRB-like workspace under root: four weight files
// with 65 % of the bytes and small files (logs and text half the time,
// incompressible the rest) with the other 35 %.
func makeTree(root string, gib, small int) (int64, error) {
	r := rand.New(rand.NewPCG(42, 1))
	total := int64(gib) << 30
	var written int64
	large := total * 65 / 100 / 4
	weightMap := map[string]string{}
	for i := 0; i < 4; i++ {
		shard, tensor := fmt.Sprintf("model-%05d-of-00004.safetensors", i+1), fmt.Sprintf("w%d", i+1)
		if err := writeWeights(filepath.Join(root, "model", shard), tensor, large, r); err != nil {
			return 0, err
		}
		weightMap[tensor] = shard
		written += large
	}
	index, _ := json.Marshal(map[string]any{"weight_map": weightMap})
	if err := os.WriteFile(filepath.Join(root, "model", "model.safetensors.index.json"), index, 0o644); err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(root, "model", "config.json"), []byte(`{"model_type":"llama","torch_dtype":"float16"}`), 0o644); err != nil {
		return 0, err
	}
	if err := os.MkdirAll(filepath.Join(root, "output"), 0o755); err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(root, "output", "submission.json"), []byte(`{"model_path":"model"}`), 0o644); err != nil {
		return 0, err
	}
	each := (total - written) / int64(small)
	for i := 0; i < small; i++ {
		p := filepath.Join(root, "runs", fmt.Sprintf("d%03d", i%100), fmt.Sprintf("f%05d.txt", i))
		n := each/2 + int64(r.IntN(int(each)))
		if i%2 == 0 {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return 0, err
			}
			line := []byte(fmt.Sprintf("step %d loss %.6f lr %.2e\n", i, r.Float64(), r.Float64()))
			var sb strings.Builder
			for int64(sb.Len()) < n {
				sb.Write(line)
			}
			if err := os.WriteFile(p, []byte(sb.String()), 0o644); err != nil {
				return 0, err
			}
		} else if err := writeRandom(p, n, r); err != nil {
			return 0, err
		}
		written += n
	}
	return written, nil
}

// change rewrites about 1 % of the bytes: a region of the big file and a
// few small files.
func change(root string, total int64) (int64, error) {
	r := rand.New(rand.NewPCG(7, 7))
	target := total / 100
	f, err := os.OpenFile(filepath.Join(root, "model", "model-00001-of-00004.safetensors"), os.O_WRONLY, 0)
	if err != nil {
		return 0, err
	}
	region := target * 3 / 4
	buf := make([]byte, region)
	for i := range buf {
		buf[i] = byte(r.IntN(256))
	}
	if _, err := f.WriteAt(buf, 100<<20); err != nil {
		return 0, err
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	changed := region
	files, _ := filepath.Glob(filepath.Join(root, "runs", "d00*", "*.txt"))
	for _, p := range files {
		if changed >= target {
			break
		}
		st, err := os.Stat(p)
		if err != nil {
			return 0, err
		}
		if err := writeRandom(p, st.Size(), r); err != nil {
			return 0, err
		}
		changed += st.Size()
	}
	return changed, nil
}
