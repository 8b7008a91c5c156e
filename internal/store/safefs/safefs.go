// Reading an agent's tree safely: names refused that leave the root or pass a link.

// Package safefs reads what an untrusted agent left, as data: a name is
// resolved inside a root from directory descriptors, never through a
// symlink, never to anything but a regular file or a directory, and a
// read is capped. An agent may be changing the tree while it is read
// (a live workspace): what was checked is what is opened.
package safefs

import (
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrRefused is what a name that leaves the root, passes through a
// symlink or names something other than expected is refused with.
var ErrRefused = errors.New("refused")

// ErrOutside is a refusal of a name that leaves the root.
var ErrOutside = fmt.Errorf("%w: outside the workspace", ErrRefused)

func refuse(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, a...))
}

// DirPath returns root/rel when it is a real directory inside root,
// reached with no symlink on the way.
func DirPath(root, rel string) (string, error) {
	r, err := OpenDir(root)
	if err != nil {
		return "", err
	}
	defer func() { _ = r.Close() }()
	d, err := r.SubPath(rel)
	if err != nil {
		return "", err
	}
	_ = d.Close()
	return filepath.Join(root, filepath.FromSlash(path.Clean(filepath.ToSlash(rel)))), nil
}

// ReadFile reads root/rel, a regular file inside root of at most max
// bytes, reached with no symlink on the way.
func ReadFile(root, rel string, max int64) ([]byte, error) {
	r, err := OpenDir(root)
	if err != nil {
		return nil, err
	}
	defer func() { _ = r.Close() }()
	f, st, err := r.OpenPath(filepath.ToSlash(rel))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return readCapped(f, st.Size, rel, max)
}

// readCapped reads f, of stat size size, refusing more than max bytes.
func readCapped(f io.Reader, size int64, name string, max int64) ([]byte, error) {
	if size > max {
		return nil, refuse("%s holds %d bytes, more than the %d read", name, size, max)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, refuse("%s grew past %d bytes", name, max)
	}
	return b, nil
}

// maxLinkHops bounds a chain of symlinks, as the kernel does.
const maxLinkHops = 40

// CheckLinks refuses dir (inside root) when a symlink under it leads out
// of root, through any chain of links: absolute targets, and relative
// ones that climb out. A tool that reads dir (an evaluator on the host)
// then never reaches a host file through it.
func CheckLinks(root, dir string) error {
	rel, err := filepath.Rel(root, dir)
	if err != nil {
		return fmt.Errorf("%s is not in %s", dir, root)
	}
	r, err := OpenDir(root)
	if err != nil {
		return err
	}
	defer func() { _ = r.Close() }()
	d, err := r.SubPath(filepath.ToSlash(rel))
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	return d.Walk(func(e Entry) error {
		if e.Stat.Mode&unix.S_IFMT != unix.S_IFLNK {
			return nil
		}
		link := strings.Split(e.Rel, "/") // e.Rel is relative to root
		hops := 0
		return resolveInside(r, link[:len(link)-1], link[len(link)-1:], &hops)
	})
}

// resolveInside resolves the components rest below the real directory
// at, following links as the kernel does (a link's target is read
// relative to the directory holding it, ".." steps out of what was
// resolved so far, not out of the text), and refuses any step out of r.
// A path that stops resolving (missing, a file in the middle) reaches
// nothing.
func resolveInside(r *Dir, at, rest []string, hops *int) error {
	at = slices.Clone(at)
	for len(rest) > 0 {
		part := rest[0]
		rest = rest[1:]
		switch part {
		case "", ".":
			continue
		case "..":
			if len(at) == 0 {
				return refuse("a link under it leads outside the workspace")
			}
			at = at[:len(at)-1]
			continue
		}
		cand := strings.Join(append(slices.Clone(at), part), "/")
		st, err := r.Lstat(cand)
		if err != nil {
			return nil
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			if *hops++; *hops > maxLinkHops {
				return refuse("%s: more than %d links", cand, maxLinkHops)
			}
			target, err := r.Readlink(cand)
			if err != nil {
				return err
			}
			if path.IsAbs(target) {
				return refuse("%s links to %s, outside the workspace", cand, target)
			}
			rest = append(strings.Split(target, "/"), rest...)
		case unix.S_IFDIR:
			at = append(at, part)
		default:
			if len(rest) > 0 {
				return nil
			}
		}
	}
	return nil
}
