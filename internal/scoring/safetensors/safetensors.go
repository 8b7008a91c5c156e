// Safetensors headers: parameters, bytes, dtypes; pickles refused.

// Package safetensors reads the headers of .safetensors files (an 8-byte
// little-endian length, then a JSON table of tensors) to learn a model's
// parameter count, byte size and dtypes without loading its weights.
package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/mlrb/mlrb/internal/store/safefs"
)

// maxHeader bounds the JSON header; real ones are kilobytes to a few MB.
const maxHeader = 100 << 20

// Tensor is one entry of the header.
type Tensor struct {
	DType       string   `json:"dtype"`
	Shape       []int64  `json:"shape"`
	DataOffsets [2]int64 `json:"data_offsets"`
}

// Header is a file's tensor table.
type Header struct {
	Tensors  map[string]Tensor
	Metadata map[string]string
	// DataBytes is the size of the data section the offsets describe.
	DataBytes int64
}

var dtypeSize = map[string]int64{
	"F64": 8, "I64": 8, "U64": 8,
	"F32": 4, "I32": 4, "U32": 4,
	"F16": 2, "BF16": 2, "I16": 2, "U16": 2,
	"I8": 1, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1,
}

// TorchName maps a safetensors dtype to the torch name task specs use.
func TorchName(d string) string {
	switch d {
	case "F64":
		return "float64"
	case "F32":
		return "float32"
	case "F16":
		return "float16"
	case "BF16":
		return "bfloat16"
	case "I64":
		return "int64"
	case "I32":
		return "int32"
	case "I16":
		return "int16"
	case "I8":
		return "int8"
	case "U8":
		return "uint8"
	case "BOOL":
		return "bool"
	case "F8_E4M3":
		return "float8_e4m3fn"
	case "F8_E5M2":
		return "float8_e5m2"
	}
	return d
}

// ReadHeader parses and checks the header of the open file f (named
// path, for messages) against its size. It is read through the caller's
// descriptor: a weights file is the agent's data, opened by Summarise
// from the model dir's descriptor, never through a link.
func ReadHeader(f *os.File, path string) (*Header, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	var n uint64
	if err := binary.Read(f, binary.LittleEndian, &n); err != nil {
		return nil, fmt.Errorf("%s: no safetensors header: %w", path, err)
	}
	if n == 0 || n > maxHeader || int64(n)+8 > st.Size() {
		return nil, fmt.Errorf("%s: header length %d does not fit a %d-byte file", path, n, st.Size())
	}
	raw := make([]byte, n)
	if _, err := io.ReadFull(f, raw); err != nil {
		return nil, fmt.Errorf("%s: header: %w", path, err)
	}
	var table map[string]json.RawMessage
	if err := json.Unmarshal(raw, &table); err != nil {
		return nil, fmt.Errorf("%s: header is not JSON: %w", path, err)
	}
	h := &Header{Tensors: map[string]Tensor{}, DataBytes: st.Size() - 8 - int64(n)}
	for name, v := range table {
		if name == "__metadata__" {
			if err := json.Unmarshal(v, &h.Metadata); err != nil {
				return nil, fmt.Errorf("%s: __metadata__: %w", path, err)
			}
			continue
		}
		var t Tensor
		if err := json.Unmarshal(v, &t); err != nil {
			return nil, fmt.Errorf("%s: tensor %q: %w", path, name, err)
		}
		size, ok := dtypeSize[t.DType]
		if !ok {
			return nil, fmt.Errorf("%s: tensor %q has unknown dtype %q", path, name, t.DType)
		}
		elems := t.Elements()
		if elems < 0 {
			return nil, fmt.Errorf("%s: tensor %q has a negative dimension", path, name)
		}
		b, e := t.DataOffsets[0], t.DataOffsets[1]
		if b < 0 || e < b || e > h.DataBytes || e-b != elems*size {
			return nil, fmt.Errorf("%s: tensor %q: offsets [%d,%d] do not hold %d × %s in %d data bytes", path, name, b, e, elems, t.DType, h.DataBytes)
		}
		h.Tensors[name] = t
	}
	return h, nil
}

// Elements is the product of the shape (1 for a scalar).
func (t Tensor) Elements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		if d < 0 {
			return -1
		}
		n *= d
	}
	return n
}

// Summary describes a model directory's safetensors files together.
type Summary struct {
	Files  int
	Params int64
	Bytes  int64            // tensor data bytes
	DTypes map[string]int64 // torch dtype -> parameters
	// Tensors are every file's tensors by name.
	Tensors map[string]Tensor
}

// ErrNoFiles means the directory holds no weights the loader would load
// as safetensors.
var ErrNoFiles = errors.New("no safetensors weights (model.safetensors or model.safetensors.index.json)")

// ErrPickled refuses weights saved as pickles (pytorch_model.bin, .pt,
// .pth, .ckpt): loading one runs whatever code it holds (torch.load,
// CVE-2025-32434), so they are never loaded.
var ErrPickled = errors.New("pickled weights are refused: loading a pickle runs code it holds (torch.load, CVE-2025-32434); save the model with safetensors (save_pretrained(dir, safe_serialization=True))")

// The names transformers looks for, in its order, when it loads a model
// directory with use_safetensors=True.
const (
	SingleFile = "model.safetensors"
	IndexFile  = "model.safetensors.index.json"
)

var pickled = []string{".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle"}

// maxIndex caps the shard index read (a 400 B model's index is ~100 KB).
const maxIndex = 16 << 20

// Loaded names the files transformers loads from dir with
// use_safetensors=True, as it chooses them: model.safetensors if it is
// there, else the shards model.safetensors.index.json maps tensors to
// (each a plain file in dir). Any other .safetensors file is not loaded,
// so it is not counted: a decoy beside the real weights changes nothing.
// With neither, pickled weights in dir are ErrPickled, and no weights
// at all ErrNoFiles. Files are reached from dir's descriptor, never
// through a link.
func Loaded(dir string) ([]string, error) {
	d, err := safefs.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = d.Close() }()
	if st, err := d.Lstat(SingleFile); err == nil {
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			return nil, fmt.Errorf("%s: %w: not a regular file (%s)", SingleFile, safefs.ErrRefused, safefs.Mode(st).Type())
		}
		return []string{SingleFile}, nil
	}
	b, err := safefs.ReadFile(dir, IndexFile, maxIndex)
	switch {
	case err == nil:
		return shards(b)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%s: %w", IndexFile, err)
	}
	names, err := d.Names()
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if slices.Contains(pickled, strings.ToLower(filepath.Ext(n))) {
			return nil, fmt.Errorf("%s: %w", n, ErrPickled)
		}
	}
	return nil, fmt.Errorf("%s: %w", dir, ErrNoFiles)
}

// shards are the distinct files an index's weight_map names, each a
// plain name in the model directory.
func shards(index []byte) ([]string, error) {
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(index, &idx); err != nil {
		return nil, fmt.Errorf("%s: %w", IndexFile, err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("%s: no weight_map", IndexFile)
	}
	seen := map[string]bool{}
	var files []string
	for tensor, f := range idx.WeightMap {
		if f == "" || f != filepath.Base(f) || f == "." || f == ".." || filepath.Ext(f) != ".safetensors" {
			return nil, fmt.Errorf("%s: tensor %q maps to %q, not a .safetensors file of the model directory: %w", IndexFile, tensor, f, safefs.ErrRefused)
		}
		if !seen[f] {
			seen[f] = true
			files = append(files, f)
		}
	}
	sort.Strings(files)
	return files, nil
}

// Summarise reads the headers of the weights the loader loads from dir
// (Loaded): the parameters, bytes and dtypes that will be evaluated.
func Summarise(dir string) (*Summary, error) {
	files, err := Loaded(dir)
	if err != nil {
		return nil, err
	}
	d, err := safefs.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = d.Close() }()
	s := &Summary{DTypes: map[string]int64{}, Tensors: map[string]Tensor{}}
	for _, name := range files {
		f, _, err := d.Open(name, nil)
		if err != nil {
			return nil, err
		}
		h, err := ReadHeader(f, name)
		_ = f.Close()
		if err != nil {
			return nil, err
		}
		s.Files++
		for name, t := range h.Tensors {
			s.Tensors[name] = t
			n := t.Elements()
			s.Params += n
			s.Bytes += n * dtypeSize[t.DType]
			s.DTypes[TorchName(t.DType)] += n
		}
	}
	return s, nil
}
