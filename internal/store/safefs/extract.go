package safefs

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ExtractTar writes a tar stream under dir: directories, regular files,
// symlinks (their targets as they are: data, never followed here) and
// hardlinks to entries already written. An entry that would land outside
// dir, or below a symlink, is refused.
func ExtractTar(r io.Reader, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tr := tar.NewReader(r)
	type dirMeta struct {
		path string
		mode os.FileMode
		mt   time.Time
	}
	var dirs []dirMeta
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read archive: %w", err)
		}
		target, err := entryPath(dir, hdr.Name)
		if err != nil {
			return err
		}
		mode := os.FileMode(hdr.Mode).Perm()
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
			dirs = append(dirs, dirMeta{target, mode, hdr.ModTime})
		case tar.TypeReg:
			if err := writeFile(target, tr, mode, hdr.ModTime); err != nil {
				return err
			}
		case tar.TypeSymlink:
			_ = os.Remove(target)
			if err := os.Symlink(hdr.Linkname, target); err != nil {
				return err
			}
		case tar.TypeLink:
			src, err := entryPath(dir, hdr.Linkname)
			if err != nil {
				return err
			}
			if st, err := os.Lstat(src); err != nil || !st.Mode().IsRegular() {
				return fmt.Errorf("archive: hardlink %s to %s, which is no regular file written before", hdr.Name, hdr.Linkname)
			}
			_ = os.Remove(target)
			if err := os.Link(src, target); err != nil {
				return err
			}
		default:
			// Devices, fifos and the like are no workspace content.
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		setDirMeta(dirs[i].path, dirs[i].mode, dirs[i].mt)
	}
	return nil
}

// setDirMeta sets an extracted directory's mode and time through a
// descriptor opened without following a link: a later entry may have put
// a symlink where the (empty) directory was, and chmod or chtimes by path
// would follow it out (to /, say) with the worker's rights. Its parents
// hold it, so they are still directories.
func setDirMeta(p string, mode os.FileMode, mt time.Time) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return // no longer a directory of the archive's: nothing to set
	}
	defer func() { _ = unix.Close(fd) }()
	_ = unix.Fchmod(fd, uint32(mode.Perm()))
	tv := unix.NsecToTimeval(mt.UnixNano())
	_ = unix.Futimes(fd, []unix.Timeval{tv, tv})
}

// entryPath resolves an archive name under dir, refusing names that climb
// out and names whose parent directories (as written so far) hold a
// symlink, which a write would follow.
func entryPath(dir, name string) (string, error) {
	clean := path.Clean("/" + strings.TrimPrefix(name, "./"))
	if clean == "/" || clean != "/"+strings.TrimSuffix(strings.TrimPrefix(name, "./"), "/") {
		if clean == "/" {
			return "", fmt.Errorf("archive: entry %q names the root", name)
		}
		return "", fmt.Errorf("archive: entry %q is not a clean relative name", name)
	}
	target := filepath.Join(dir, filepath.FromSlash(clean))
	rel := strings.TrimPrefix(path.Dir(clean), "/")
	p := dir
	for _, part := range strings.Split(rel, "/") {
		if part == "" {
			continue
		}
		p = filepath.Join(p, part)
		st, err := os.Lstat(p)
		if errors.Is(err, os.ErrNotExist) {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return "", err
			}
			continue
		}
		if err != nil {
			return "", err
		}
		if !st.IsDir() {
			return "", fmt.Errorf("archive: entry %q lies below %s, which is no directory", name, p)
		}
	}
	return target, nil
}

func writeFile(target string, r io.Reader, mode os.FileMode, mt time.Time) error {
	_ = os.Remove(target) // a symlink or an earlier file of that name is replaced, never written through
	f, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Chtimes(target, mt, mt)
}
