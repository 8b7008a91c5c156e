package e2e

import (
	"bytes"
	"encoding/base64"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// payload is a base64 payload in an exported history, with or without
// the space the temporal CLI puts after the colon.
var payload = regexp.MustCompile(`"data":\s*"([A-Za-z0-9+/=]+)"`)

// withPayloads appends an export's payloads, decoded, to it: a secret
// cannot hide in base64.
func withPayloads(export []byte) []byte {
	out := bytes.Clone(export)
	for _, m := range payload.FindAllSubmatch(export, -1) {
		if b, err := base64.StdEncoding.DecodeString(string(m[1])); err == nil {
			out = append(append(out, '\n'), b...)
		}
	}
	return out
}

// readFiles reads every file under roots (or a root that is a file) into
// into, by path.
func readFiles(into map[string][]byte, roots ...string) {
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if b, err := os.ReadFile(p); err == nil {
					into[p] = b
				}
			}
			return nil
		})
	}
}

// holdsNone fails for each secret found in any of places.
func holdsNone(t *testing.T, places map[string][]byte, secrets ...string) {
	t.Helper()
	for where, b := range places {
		for _, s := range secrets {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("a secret is in %s", where)
			}
		}
	}
}
