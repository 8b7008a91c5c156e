// Placing a restored file: written beside, renamed into place through its parent's descriptor.

package checkpoint

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/mlrb/mlrb/internal/store/safefs"
)

// A restored file is written under a private name in its directory and
// renamed into place only once it is whole, its mode and times set
// through its descriptor. The directory is opened from the restore's
// root with no symlink on the way (safefs), and the file created in it
// exclusively: neither a symlink the checkpoint holds, restored
// meanwhile, nor one left under a guessed name redirects a write.

// placing is one file being restored.
type placing struct {
	d         *safefs.Dir
	tmp, name string
	out       *os.File
	// done releases d once the file is placed or abandoned.
	done func()
	// over: placed or abandoned, once (a file's chunk tasks may fail
	// together).
	over sync.Once
}

// dir opens the directory rel of the restore ("." is the root).
func (r *restoring) dir(rel string) (*safefs.Dir, error) {
	if rel == "." {
		return r.root, nil
	}
	return r.root.SubPath(rel)
}

// release closes a directory dir opened, unless it is the root.
func (r *restoring) release(d *safefs.Dir) {
	if d != r.root {
		_ = d.Close()
	}
}

// create makes name's private file in d; done runs once it is placed or
// abandoned.
func create(d *safefs.Dir, name string, done func()) (*placing, error) {
	tmp := tempName()
	fd, err := unix.Openat(d.Fd(), tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		done()
		return nil, &os.PathError{Op: "create", Path: tmp, Err: err}
	}
	return &placing{d: d, tmp: tmp, name: name, out: os.NewFile(uintptr(fd), tmp), done: done}, nil
}

// commit gives the file f's mode and mtime (cut back to f's size first
// when padded: direct writes pad the last chunk to a whole block), and
// renames it to its name; on any error it is abandoned.
func (p *placing) commit(f File, padded bool) error {
	var err error
	if padded {
		err = p.out.Truncate(f.Size)
	}
	if err == nil {
		err = p.out.Chmod(f.Mode.Perm())
	}
	if err == nil {
		err = setMTime(int(p.out.Fd()), f.MTime)
	}
	if cerr := p.out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(p.d.Fd(), p.tmp, p.d.Fd(), p.name)
	}
	if err != nil {
		p.abandon()
		return err
	}
	p.over.Do(p.done)
	return nil
}

// abandon closes and removes the private file.
func (p *placing) abandon() {
	_ = p.out.Close()
	p.over.Do(func() {
		_ = unix.Unlinkat(p.d.Fd(), p.tmp, 0)
		p.done()
	})
}

// tempName is a name no one can predict, of a fixed length: a file
// restored under a name of 255 bytes (NAME_MAX) is written under this
// one first.
func tempName() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return ".mlrb-" + hex.EncodeToString(b[:])
}
