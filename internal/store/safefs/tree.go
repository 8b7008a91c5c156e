// Dir is an open directory of a tree an agent can write while the worker reads it.

package safefs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Dir is an open directory of a tree an agent can write while the worker
// reads it. Every name below it is resolved from its descriptor, one
// component at a time and never through a symlink: a directory the agent
// swaps for a link after it was listed is seen as the link it now is,
// never followed to wherever it points.
type Dir struct {
	f   *os.File
	rel string // its path in the tree, for messages ("." for the root)
}

// OpenDir opens dir, the root of a tree, which must itself be a directory
// (not a link to one). The path to it is the worker's own.
func OpenDir(dir string) (*Dir, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	return &Dir{f: os.NewFile(uintptr(fd), dir), rel: "."}, nil
}

// Close releases the directory's descriptor.
func (d *Dir) Close() error { return d.f.Close() }

// Path is the path the directory was opened at, for messages.
func (d *Dir) Path() string { return d.f.Name() }

// Fd is the directory's descriptor, valid until Close.
func (d *Dir) Fd() int { return int(d.f.Fd()) }

// Stat is the directory's own stat.
func (d *Dir) Stat() (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstat(d.Fd(), &st)
	return st, err
}

func (d *Dir) join(name string) string {
	if d.rel == "." {
		return name
	}
	return d.rel + "/" + name
}

func (d *Dir) pathErr(op, name string, err error) error {
	return &os.PathError{Op: op, Path: d.join(name), Err: err}
}

// Names lists the directory's entries, sorted, read from its descriptor.
func (d *Dir) Names() ([]string, error) {
	// A second descriptor: reading entries moves the offset, and the
	// directory may be listed again.
	fd, err := unix.Openat(d.Fd(), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, d.pathErr("open", ".", err)
	}
	f := os.NewFile(uintptr(fd), d.rel)
	defer func() { _ = f.Close() }()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", d.rel, err)
	}
	slices.Sort(names)
	return names, nil
}

// Lstat stats name in the directory without following it.
func (d *Dir) Lstat(name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(d.Fd(), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return st, d.pathErr("lstat", name, err)
	}
	return st, nil
}

// Sub opens the subdirectory name; a link, or anything but a directory,
// is refused. want, if given, is the stat the caller listed it with: an
// entry replaced since (another inode) is refused too.
func (d *Dir) Sub(name string, want *unix.Stat_t) (*Dir, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	fd, err := unix.Openat(d.Fd(), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return nil, refuse("%s is no longer a directory", d.join(name))
		}
		return nil, d.pathErr("open", name, err)
	}
	rel := d.join(name)
	if name == "." {
		rel = d.rel
	}
	sub := &Dir{f: os.NewFile(uintptr(fd), rel), rel: rel}
	if want != nil {
		st, err := sub.Stat()
		if err != nil || st.Dev != want.Dev || st.Ino != want.Ino {
			_ = sub.Close()
			return nil, refuse("%s was replaced while it was read", sub.rel)
		}
	}
	return sub, nil
}

// Open opens the regular file name for reading. A link, a FIFO (opened
// without blocking), a device or an entry replaced since it was listed
// (want) is refused: the descriptor is the very file listed.
func (d *Dir) Open(name string, want *unix.Stat_t) (*os.File, unix.Stat_t, error) {
	var st unix.Stat_t
	if err := checkName(name); err != nil {
		return nil, st, err
	}
	fd, err := unix.Openat(d.Fd(), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, st, refuse("%s is a symlink: agent output is data, never a path the worker follows", d.join(name))
		}
		return nil, st, d.pathErr("open", name, err)
	}
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return nil, st, d.pathErr("stat", name, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		_ = unix.Close(fd)
		return nil, st, refuse("%s is not a regular file (%s)", d.join(name), modeOf(st).Type())
	}
	if want != nil && (st.Dev != want.Dev || st.Ino != want.Ino) {
		_ = unix.Close(fd)
		return nil, st, refuse("%s was replaced while it was read", d.join(name))
	}
	// Reads of a regular file never block; the flag only kept a FIFO
	// from holding the open.
	if err := unix.SetNonblock(fd, false); err != nil {
		_ = unix.Close(fd)
		return nil, st, d.pathErr("open", name, err)
	}
	return os.NewFile(uintptr(fd), d.join(name)), st, nil
}

// Readlink reads the symlink name.
func (d *Dir) Readlink(name string) (string, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Readlinkat(d.Fd(), name, buf)
		if err != nil {
			return "", d.pathErr("readlink", name, err)
		}
		if n < len(buf) {
			return string(buf[:n]), nil
		}
		if len(buf) >= unix.PathMax {
			return "", d.pathErr("readlink", name, unix.ENAMETOOLONG)
		}
		buf = make([]byte, 2*len(buf))
	}
}

// Mkdir makes the subdirectory name unless it exists as a directory; an
// entry of another kind (a link) under that name is refused.
func (d *Dir) Mkdir(name string, perm os.FileMode) error {
	if err := checkName(name); err != nil {
		return err
	}
	err := unix.Mkdirat(d.Fd(), name, uint32(perm.Perm()))
	if err == nil || !errors.Is(err, unix.EEXIST) {
		if err != nil {
			return d.pathErr("mkdir", name, err)
		}
		return nil
	}
	st, err := d.Lstat(name)
	if err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return refuse("%s is a %s, not a directory", d.join(name), modeOf(st).Type())
	}
	return nil
}

// Unlink removes the file or link name from d, if there is one; a
// directory is never removed (unlinkat without AT_REMOVEDIR), so that
// nothing takes a directory's place through this.
func (d *Dir) Unlink(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := unix.Unlinkat(d.Fd(), name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return d.pathErr("unlink", name, err)
	}
	return nil
}

// MkdirAll makes rel (slash-separated, inside d) and returns it open,
// each component made or opened from its parent's descriptor.
func (d *Dir) MkdirAll(rel string, perm os.FileMode) (*Dir, error) {
	parts, err := splitRel(rel)
	if err != nil {
		return nil, err
	}
	cur, err := d.Sub(".", nil)
	if err != nil {
		return nil, err
	}
	for _, p := range parts {
		err := cur.Mkdir(p, perm)
		var next *Dir
		if err == nil {
			next, err = cur.Sub(p, nil)
		}
		_ = cur.Close()
		if err != nil {
			return nil, err
		}
		cur = next
	}
	return cur, nil
}

// noOpenat2 is set once the kernel turns out to lack openat2 (before
// Linux 5.6): resolve then walks the components itself.
var noOpenat2 atomic.Bool

// resolve opens rel, a path inside d, with no component a symlink and
// nothing leaving d: openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS,
// else one O_NOFOLLOW open per component. flags are added to O_RDONLY.
func (d *Dir) resolve(rel string, flags int) (int, error) {
	parts, err := splitRel(rel)
	if err != nil {
		return -1, err
	}
	if len(parts) == 0 {
		parts = []string{"."}
	}
	flags |= unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK | unix.O_NOCTTY
	if !noOpenat2.Load() {
		fd, err := unix.Openat2(d.Fd(), strings.Join(parts, "/"), &unix.OpenHow{Flags: uint64(flags),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.ENOSYS):
			noOpenat2.Store(true)
		case errors.Is(err, unix.ELOOP):
			return -1, refuse("%s passes through a symlink: agent output is data, never a path the worker follows", rel)
		case errors.Is(err, unix.EXDEV):
			return -1, fmt.Errorf("%q: %w", rel, ErrOutside)
		default:
			return -1, &os.PathError{Op: "open", Path: rel, Err: err}
		}
	}
	dirfd := d.Fd()
	for i, p := range parts {
		f := unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if i == len(parts)-1 {
			f = flags
		}
		fd, err := unix.Openat(dirfd, p, f, 0)
		if dirfd != d.Fd() {
			_ = unix.Close(dirfd)
		}
		if errors.Is(err, unix.ELOOP) || (errors.Is(err, unix.ENOTDIR) && i < len(parts)-1) {
			return -1, refuse("%s passes through a symlink or a file: agent output is data, never a path the worker follows", rel)
		}
		if err != nil {
			return -1, &os.PathError{Op: "open", Path: rel, Err: err}
		}
		dirfd = fd
	}
	return dirfd, nil
}

// SubPath opens the directory rel inside d (see resolve).
func (d *Dir) SubPath(rel string) (*Dir, error) {
	fd, err := d.resolve(rel, unix.O_DIRECTORY)
	if errors.Is(err, unix.ENOTDIR) {
		return nil, refuse("%s is not a directory", rel)
	}
	if err != nil {
		return nil, err
	}
	clean := path.Clean(rel)
	return &Dir{f: os.NewFile(uintptr(fd), d.join(clean)), rel: d.join(clean)}, nil
}

// OpenPath opens the regular file rel inside d (see resolve).
func (d *Dir) OpenPath(rel string) (*os.File, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := d.resolve(rel, 0)
	if err != nil {
		return nil, st, err
	}
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return nil, st, &os.PathError{Op: "stat", Path: rel, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		_ = unix.Close(fd)
		return nil, st, refuse("%s is not a regular file (%s)", rel, modeOf(st).Type())
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		_ = unix.Close(fd)
		return nil, st, &os.PathError{Op: "open", Path: rel, Err: err}
	}
	return os.NewFile(uintptr(fd), d.join(path.Clean(rel))), st, nil
}

// splitRel splits a slash-separated path inside a tree into its
// components; one that climbs out or is absolute is refused.
func splitRel(rel string) ([]string, error) {
	clean := path.Clean(strings.ReplaceAll(rel, "\\", "/"))
	if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return nil, fmt.Errorf("%q: %w", rel, ErrOutside)
	}
	if clean == "." {
		return nil, nil
	}
	return strings.Split(clean, "/"), nil
}

func checkName(name string) error {
	if name == "" || name == ".." || strings.Contains(name, "/") {
		return fmt.Errorf("%q: %w", name, ErrOutside)
	}
	return nil
}

// Mode is a stat's mode as an fs.FileMode.
func Mode(st unix.Stat_t) fs.FileMode { return modeOf(st) }

func modeOf(st unix.Stat_t) fs.FileMode {
	m := fs.FileMode(st.Mode & 0o777)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		m |= fs.ModeDir
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFIFO:
		m |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		m |= fs.ModeSocket
	case unix.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		m |= fs.ModeDevice
	}
	if st.Mode&unix.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if st.Mode&unix.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if st.Mode&unix.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}
