package safefs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// tree lays out a workspace with a host directory beside it that holds a
// secret, and returns both.
func tree(t *testing.T) (root, host string) {
	t.Helper()
	base := t.TempDir()
	root, host = filepath.Join(base, "ws"), filepath.Join(base, "host")
	for _, d := range []string{filepath.Join(root, "a", "b"), host} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, body := range map[string]string{filepath.Join(root, "a", "b", "f"): "data", filepath.Join(host, "secret"): "HOST"} {
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root, host
}

// bothResolvers runs a test with openat2 and with the per-component walk
// older kernels get.
func bothResolvers(t *testing.T, fn func(t *testing.T)) {
	for _, fallback := range []bool{false, true} {
		name := "openat2"
		if fallback {
			name = "per-component"
		}
		t.Run(name, func(t *testing.T) {
			noOpenat2.Store(fallback)
			t.Cleanup(func() { noOpenat2.Store(false) })
			fn(t)
		})
	}
}

func TestResolveNeverThroughALink(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		root, host := tree(t)
		if err := os.Symlink(host, filepath.Join(root, "a", "out")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("b", filepath.Join(root, "a", "in")); err != nil {
			t.Fatal(err)
		}
		if b, err := ReadFile(root, "a/b/f", 10); err != nil || string(b) != "data" {
			t.Fatalf("a plain file: %q, %v", b, err)
		}
		for _, rel := range []string{"a/out/secret", "a/in/f", "../host/secret", "/etc/passwd", "a/b/../../../host/secret"} {
			if b, err := ReadFile(root, rel, 10); !errors.Is(err, ErrRefused) {
				t.Errorf("%s: read %q, %v; want a refusal", rel, b, err)
			}
		}
		if _, err := DirPath(root, "a/out"); !errors.Is(err, ErrRefused) {
			t.Errorf("DirPath through a link: %v", err)
		}
		if _, err := ReadFile(root, "a/b/f", 3); !errors.Is(err, ErrRefused) {
			t.Errorf("a file over the cap: %v", err)
		}
	})
}

func TestAFIFOIsRefusedWithoutBlocking(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		root, _ := tree(t)
		if err := syscall.Mkfifo(filepath.Join(root, "a", "pipe"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadFile(root, "a/pipe", 10); !errors.Is(err, ErrRefused) {
			t.Fatalf("a FIFO: %v; want a refusal (and no hang)", err)
		}
		d, err := OpenDir(root)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = d.Close() }()
		a, err := d.Sub("a", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = a.Close() }()
		if _, _, err := a.Open("pipe", nil); !errors.Is(err, ErrRefused) {
			t.Fatalf("Open of a FIFO: %v", err)
		}
	})
}

func TestMkdirAllRefusesALinkOnTheWay(t *testing.T) {
	root, host := tree(t)
	if err := os.Symlink(host, filepath.Join(root, "work")); err != nil {
		t.Fatal(err)
	}
	d, err := OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.Close() }()
	if _, err := d.MkdirAll("work/output", 0o755); !errors.Is(err, ErrRefused) {
		t.Fatalf("MkdirAll through a link: %v", err)
	}
	if _, err := os.Stat(filepath.Join(host, "output")); !os.IsNotExist(err) {
		t.Fatalf("a directory was made on the host: %v", err)
	}
	sub, err := d.MkdirAll("x/y/z", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	_ = sub.Close()
	if st, err := os.Stat(filepath.Join(root, "x", "y", "z")); err != nil || !st.IsDir() {
		t.Fatalf("x/y/z: %v", err)
	}
}

func TestWalkSeesLinksAsLinks(t *testing.T) {
	root, host := tree(t)
	if err := os.Symlink(host, filepath.Join(root, "a", "out")); err != nil {
		t.Fatal(err)
	}
	d, err := OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.Close() }()
	var seen []string
	err = d.Walk(func(e Entry) error {
		seen = append(seen, e.Rel+":"+e.Mode().Type().String())
		if e.Mode()&os.ModeSymlink != 0 {
			if target, err := e.Readlink(); err != nil || target != host {
				t.Errorf("readlink %s = %q, %v", e.Rel, target, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "a:d---------|a/b:d---------|a/b/f:----------|a/out:L---------"
	if got := strings.Join(seen, "|"); got != want {
		t.Fatalf("walk = %s; want %s", got, want)
	}
}

// TestCheckLinksResolvesDotDotAfterTheLink is audit #21: l -> a/../..
// with a -> . climbs out in the kernel (".." applies to where a led),
// though the text cleans to something inside.
func TestCheckLinksResolvesDotDotAfterTheLink(t *testing.T) {
	root, _ := tree(t)
	model := filepath.Join(root, "m")
	if err := os.MkdirAll(model, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(".", filepath.Join(model, "a")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a/../..", filepath.Join(model, "l")); err != nil {
		t.Fatal(err)
	}
	if err := CheckLinks(root, model); !errors.Is(err, ErrRefused) {
		t.Fatalf("CheckLinks = %v; want a refusal", err)
	}
	_ = os.Remove(filepath.Join(model, "l"))
	if err := os.Symlink("a/../a/./a", filepath.Join(model, "l")); err != nil {
		t.Fatal(err)
	}
	if err := CheckLinks(root, model); err != nil {
		t.Fatalf("a link that stays inside: %v", err)
	}
}

// L8: a directory the agent removes between its open and its listing is
// passed over as gone, never an error that skips the whole measurement;
// the root removed is still an error.
func TestWalkPassesOverADirectoryRemovedBeforeItsListing(t *testing.T) {
	root, _ := tree(t)
	d, err := OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.Close() }()
	sub, err := d.Sub("a", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Close() }()
	if err := os.RemoveAll(filepath.Join(root, "a")); err != nil {
		t.Fatal(err)
	}
	if err := sub.walk(func(Entry) error { return nil }, 2); err != nil {
		t.Fatalf("a removed subdirectory: %v", err)
	}
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	if err := d.Walk(func(Entry) error { return nil }); err == nil {
		t.Fatal("a removed root walked without an error")
	}
}
