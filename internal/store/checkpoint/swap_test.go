package checkpoint

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mlrb/mlrb/internal/store/blob"
)

// TestDirectorySwappedForALinkIsNeverFollowed is audit #1 (reproduced
// 20/20 on the path-based walk): an agent lists a directory x full of
// subdirectories, watches it with inotify, and the moment the walker has
// listed x (IN_CLOSE_NOWRITE on x) renames x away and puts a symlink to a
// host directory in its place. A walker that resolves x/<name> by path
// then reads the host's files into the checkpoint, and the next attempt
// restores them. The canary must never appear, in the manifest or in a
// restore, however the race falls.
func TestDirectorySwappedForALinkIsNeverFollowed(t *testing.T) {
	ctx := context.Background()
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := New(store, Options{ChunkSize: 64 << 10})
	host := t.TempDir()
	const canary = "HOST-ONLY-SECRET=abc123\n"
	if err := os.WriteFile(filepath.Join(host, "zz-secret.env"), []byte(canary), 0o600); err != nil {
		t.Fatal(err)
	}
	swapped := 0
	for i := 0; i < 20; i++ {
		ws := t.TempDir()
		x := filepath.Join(ws, "x")
		for j := 0; j < 1000; j++ {
			if err := os.MkdirAll(filepath.Join(x, fmt.Sprintf("d%04d", j)), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(x, "zz-secret.env"), []byte("placeholder\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		done := swapOnList(t, x, host)
		m, err := e.Save(ctx, ws, Meta{RunID: "swap", Seq: i + 1, Attempt: 1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if <-done {
			swapped++
		}
		for _, f := range m.Files {
			if strings.HasPrefix(f.Path, "x/zz-secret.env") && f.Size == int64(len(canary)) {
				t.Fatalf("try %d: the host's file is in the checkpoint as %s (%d bytes)", i, f.Path, f.Size)
			}
		}
		out := t.TempDir()
		if err := e.Restore(ctx, m, out); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(filepath.Join(out, "x", "zz-secret.env")); err == nil && string(b) == canary {
			t.Fatalf("try %d: the next attempt would read the host's file: %q", i, b)
		}
	}
	// The race must really have been run, or the test proves nothing.
	t.Logf("the directory was swapped for a link during the walk in %d of 20 tries", swapped)
	if swapped < 15 {
		t.Fatalf("the swap happened during the walk in only %d of 20 tries", swapped)
	}
}

// swapOnList waits until dir has been listed and closed, then replaces
// it with a symlink to target; it reports whether it swapped.
func swapOnList(t *testing.T, dir, target string) <-chan bool {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		t.Fatalf("inotify: %v", err)
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CLOSE_NOWRITE); err != nil {
		t.Fatal(err)
	}
	done := make(chan bool, 1)
	go func() {
		defer func() { _ = unix.Close(fd) }()
		buf := make([]byte, 4096)
		for {
			n, err := unix.Read(fd, buf)
			if err != nil {
				done <- false
				return
			}
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				if ev.Mask&unix.IN_ISDIR != 0 && ev.Len == 0 {
					// x itself was closed after a listing.
					err1 := os.Rename(dir, dir+".old")
					err2 := os.Symlink(target, dir)
					done <- err1 == nil && err2 == nil
					return
				}
				off += unix.SizeofInotifyEvent + int(ev.Len)
			}
		}
	}()
	return done
}
