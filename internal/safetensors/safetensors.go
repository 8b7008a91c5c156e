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
	"os"
	"path/filepath"
	"sort"
	"syscall"
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

// ReadHeader parses and checks one file's header against its size.
// A symlink or anything but a regular file is refused: weights are the
// agent's data, never a path the reader follows.
func ReadHeader(path string) (*Header, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
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
}

// ErrNoFiles means the directory holds no .safetensors file.
var ErrNoFiles = errors.New("no .safetensors files")

// Summarise reads every *.safetensors under dir (sharded models have
// several).
func Summarise(dir string) (*Summary, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Ext(p) == ".safetensors" {
			if !d.Type().IsRegular() {
				return fmt.Errorf("%s is not a regular file (%s): refused", p, d.Type())
			}
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: %w", dir, ErrNoFiles)
	}
	sort.Strings(files)
	s := &Summary{DTypes: map[string]int64{}}
	for _, p := range files {
		h, err := ReadHeader(p)
		if err != nil {
			return nil, err
		}
		s.Files++
		for _, t := range h.Tensors {
			n := t.Elements()
			s.Params += n
			s.Bytes += n * dtypeSize[t.DType]
			s.DTypes[TorchName(t.DType)] += n
		}
	}
	return s, nil
}
