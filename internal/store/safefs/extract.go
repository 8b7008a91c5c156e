// ExtractTar writes a tar stream under dir.

package safefs

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ExtractTar writes a tar stream under dir: directories, regular files,
// symlinks (their targets as they are: data, never followed here) and
// hardlinks to regular files already written. Every entry is placed from
// its directory's descriptor, opened from dir's with no symlink on the
// way: an entry that would land outside dir, or below a symlink, is
// refused, and nothing already placed is resolved again by path.
func ExtractTar(r io.Reader, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root, err := OpenDir(dir)
	if err != nil {
		return err
	}
	defer func() { _ = root.Close() }()
	type dirMeta struct {
		rel  string
		mode os.FileMode
		mt   time.Time
	}
	var dirs []dirMeta
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read archive: %w", err)
		}
		rel, err := entryName(hdr.Name)
		if err != nil {
			return err
		}
		parent, err := root.MkdirAll(path.Dir(rel), 0o755)
		if err != nil {
			return fmt.Errorf("archive: entry %q: %w", hdr.Name, err)
		}
		err = extractEntry(root, parent, path.Base(rel), hdr, tr)
		_ = parent.Close()
		if err != nil {
			return fmt.Errorf("archive: entry %q: %w", hdr.Name, err)
		}
		if hdr.Typeflag == tar.TypeDir {
			dirs = append(dirs, dirMeta{rel, os.FileMode(hdr.Mode).Perm(), hdr.ModTime})
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		setDirMeta(root, dirs[i].rel, dirs[i].mode, dirs[i].mt)
	}
	return nil
}

// extractEntry places one entry as name in parent.
func extractEntry(root, parent *Dir, name string, hdr *tar.Header, body io.Reader) error {
	switch hdr.Typeflag {
	case tar.TypeDir:
		return parent.Mkdir(name, 0o755)
	case tar.TypeReg:
		return writeFile(parent, name, body, os.FileMode(hdr.Mode).Perm(), hdr.ModTime)
	case tar.TypeSymlink:
		if err := parent.Unlink(name); err != nil {
			return err
		}
		if err := unix.Symlinkat(hdr.Linkname, parent.Fd(), name); err != nil {
			return parent.pathErr("symlink", name, err)
		}
		return nil
	case tar.TypeLink:
		src, err := entryName(hdr.Linkname)
		if err != nil {
			return err
		}
		from, err := root.SubPath(path.Dir(src))
		if err != nil {
			return err
		}
		defer func() { _ = from.Close() }()
		if st, err := from.Lstat(path.Base(src)); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			return fmt.Errorf("a hardlink to %s, which is no regular file written before", hdr.Linkname)
		}
		if err := parent.Unlink(name); err != nil {
			return err
		}
		if err := unix.Linkat(from.Fd(), path.Base(src), parent.Fd(), name, 0); err != nil {
			return parent.pathErr("link", name, err)
		}
		return nil
	}
	// Devices, fifos and the like are no workspace content.
	return nil
}

// setDirMeta sets an extracted directory's mode and time through its
// descriptor, opened from root with no symlink on the way: a later entry
// may have put a symlink where the (empty) directory was, and chmod by
// path would follow it out with the worker's rights.
func setDirMeta(root *Dir, rel string, mode os.FileMode, mt time.Time) {
	d, err := root.SubPath(rel)
	if err != nil {
		return // no longer a directory of the archive's: nothing to set
	}
	defer func() { _ = d.Close() }()
	_ = unix.Fchmod(d.Fd(), uint32(mode.Perm()))
	tv := unix.NsecToTimeval(mt.UnixNano())
	_ = unix.Futimes(d.Fd(), []unix.Timeval{tv, tv})
}

// entryName is an archive name as a clean path inside the tree; a name
// that climbs out, is absolute, names the root or is not clean is refused.
func entryName(name string) (string, error) {
	trimmed := strings.TrimSuffix(strings.TrimPrefix(name, "./"), "/")
	clean := path.Clean("/" + trimmed)
	switch {
	case clean == "/":
		return "", fmt.Errorf("archive: entry %q names the root", name)
	case clean != "/"+trimmed:
		return "", fmt.Errorf("archive: entry %q is not a clean relative name", name)
	}
	return clean[1:], nil
}

// writeFile writes a regular file under a private name in d and renames
// it to name: a symlink or an earlier file of that name is replaced, never
// written through, and a directory of that name is left (the rename fails).
func writeFile(d *Dir, name string, r io.Reader, mode os.FileMode, mt time.Time) error {
	tmp := fmt.Sprintf(".mlrb-extract-%d", time.Now().UnixNano())
	fd, err := unix.Openat(d.Fd(), tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(mode.Perm()))
	if err != nil {
		return d.pathErr("create", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	_, err = io.Copy(f, r)
	if err == nil {
		err = f.Chmod(mode.Perm())
	}
	if err == nil {
		tv := unix.NsecToTimeval(mt.UnixNano())
		err = unix.Futimes(fd, []unix.Timeval{tv, tv})
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(d.Fd(), tmp, d.Fd(), name)
	}
	if err != nil {
		_ = unix.Unlinkat(d.Fd(), tmp, 0)
		return d.pathErr("write", name, err)
	}
	return nil
}
