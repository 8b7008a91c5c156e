package evaldata

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlrb/mlrb/tasks"
)

func spec(name, sum string) *tasks.Spec {
	return &tasks.Spec{ID: "t", Evaluation: tasks.Evaluation{Data: []tasks.EvalData{{Name: name, SHA256: sum, Source: "curl it"}}}}
}

// TestCheckFindsAndRefuses: a data set is found at its name with its
// spec's digest; one missing, changed, or where no data dir is set is
// refused naming the task, the path and the hash.
func TestCheckFindsAndRefuses(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "held", "test.jsonl")
	_ = os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, []byte("{\"a\": 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := Digest(path)
	if err != nil || !strings.HasPrefix(sum, "sha256:") {
		t.Fatal(err)
	}
	d := &Dir{Root: root}
	sets, err := d.Check(spec("held/test.jsonl", sum))
	if err != nil || len(sets) != 1 || sets[0].Path != path || sets[0].SHA256 != sum {
		t.Fatalf("sets %v, %v", sets, err)
	}
	var me *MissingError
	for name, tc := range map[string]struct {
		d    *Dir
		s    *tasks.Spec
		want []string
	}{
		"missing":    {d, spec("held/other.jsonl", sum), []string{"task t", filepath.Join(root, "held", "other.jsonl"), sum, "curl it"}},
		"changed":    {d, spec("held/test.jsonl", "sha256:"+strings.Repeat("0", 64)), []string{"task t", path, sum, "not the sha256:000"}},
		"no setting": {nil, spec("held/test.jsonl", sum), []string{"task t", "eval.data_dir", sum}},
	} {
		_, err := tc.d.Check(tc.s)
		if !errors.As(err, &me) {
			t.Fatalf("%s: %v", name, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", name, err, w)
			}
		}
	}
	// Rewritten in place: the kept digest is not trusted past the change.
	if err := os.WriteFile(path, []byte("{\"a\": 2, \"b\": 3}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Check(spec("held/test.jsonl", sum)); !errors.As(err, &me) {
		t.Fatalf("a rewritten set passed: %v", err)
	}
}

// TestDirectoryDigest: a directory's digest follows its files' paths and
// bytes, and a link in it is refused.
func TestDirectoryDigest(t *testing.T) {
	dir := t.TempDir()
	_ = os.WriteFile(filepath.Join(dir, "a"), []byte("1"), 0o644)
	_ = os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
	_ = os.WriteFile(filepath.Join(dir, "sub", "b"), []byte("2"), 0o644)
	one, err := Digest(dir)
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Rename(filepath.Join(dir, "sub", "b"), filepath.Join(dir, "sub", "c"))
	if two, _ := Digest(dir); two == one {
		t.Fatal("a renamed file left the digest alike")
	}
	_ = os.Symlink("/etc/passwd", filepath.Join(dir, "link"))
	if _, err := Digest(dir); err == nil || !strings.Contains(err.Error(), "regular files only") {
		t.Fatalf("a link: %v", err)
	}
}
