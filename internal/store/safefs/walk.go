// Walk: a tree walked from descriptors.

package safefs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// MaxDepth bounds how deep Walk descends: each level holds a descriptor,
// and no real workspace nests this deep.
const MaxDepth = 512

// ErrTooDeep is an Entry's Err for a directory below MaxDepth levels.
var ErrTooDeep = fmt.Errorf("%w: nested more than %d directories deep", ErrRefused, MaxDepth)

// Entry is one entry Walk meets.
type Entry struct {
	Rel  string // slash-separated path in the tree
	Name string
	Stat unix.Stat_t // its lstat: a link is a link
	Dir  *Dir        // the directory holding it, open while fn runs
	// Err, on a directory, is why Walk will not descend into it.
	Err error
}

// Mode is the entry's type and permissions.
func (e Entry) Mode() fs.FileMode { return modeOf(e.Stat) }

// Open opens the entry, a regular file, as the inode listed.
func (e Entry) Open() (*os.File, unix.Stat_t, error) { return e.Dir.Open(e.Name, &e.Stat) }

// Readlink reads the entry, a symlink.
func (e Entry) Readlink() (string, error) { return e.Dir.Readlink(e.Name) }

// Walk calls fn for every entry below d, depth-first in name order, each
// one stat'd from its directory's descriptor and each directory opened
// from its parent's. fn returning fs.SkipDir on a directory skips its
// content (on a file: nothing more); an entry gone or replaced meanwhile is passed over, as what
// the agent deleted while the walk went on.
func (d *Dir) Walk(fn func(Entry) error) error { return d.walk(fn, 1) }

func (d *Dir) walk(fn func(Entry) error, depth int) error {
	names, err := d.Names()
	if errors.Is(err, unix.ENOENT) && depth > 1 {
		// Removed since it was opened: as an entry gone meanwhile.
		return nil
	}
	if err != nil {
		return err
	}
	for _, name := range names {
		st, err := d.Lstat(name)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return err
		}
		e := Entry{Rel: d.join(name), Name: name, Stat: st, Dir: d}
		isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
		if isDir && depth >= MaxDepth {
			e.Err = ErrTooDeep
		}
		switch err := fn(e); {
		case errors.Is(err, fs.SkipDir):
			continue
		case err != nil:
			return err
		case !isDir || e.Err != nil:
			continue
		}
		sub, err := d.Sub(name, &st)
		if errors.Is(err, ErrRefused) || errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return err
		}
		err = sub.walk(fn, depth+1)
		_ = sub.Close()
		if err != nil {
			return err
		}
	}
	return nil
}
