// Package safefs reads what an untrusted agent left, as data: a name is
// resolved inside a root, never through a symlink, never to anything but
// a regular file or a directory, and a read is capped. The trees it reads
// are the worker's own restores of a checkpoint (nothing else writes them
// meanwhile), so checking each component before the open is enough.
package safefs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrRefused is what a name that leaves the root, passes through a
// symlink or names something other than expected is refused with.
var ErrRefused = errors.New("refused")

// ErrOutside is a refusal of a name that leaves the root.
var ErrOutside = fmt.Errorf("%w: outside the workspace", ErrRefused)

func refuse(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, a...))
}

// Resolve returns root/rel after checking that rel stays inside root and
// that no component of it is a symlink; the last one must exist.
func Resolve(root, rel string) (string, os.FileInfo, error) {
	clean := filepath.Clean(filepath.FromSlash(rel))
	if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return "", nil, fmt.Errorf("%q: %w", rel, ErrOutside)
	}
	p := root
	var st os.FileInfo
	if clean != "." {
		for _, part := range strings.Split(clean, string(filepath.Separator)) {
			p = filepath.Join(p, part)
			var err error
			if st, err = os.Lstat(p); err != nil {
				return "", nil, err
			}
			if st.Mode()&os.ModeSymlink != 0 {
				return "", nil, refuse("%s is a symlink (to %s): agent output is data, never a path the worker follows", rel, linkTarget(p))
			}
		}
	} else {
		var err error
		if st, err = os.Lstat(p); err != nil {
			return "", nil, err
		}
	}
	return p, st, nil
}

func linkTarget(p string) string {
	t, err := os.Readlink(p)
	if err != nil {
		return "?"
	}
	return t
}

// Dir is root/rel when it is a real directory inside root.
func Dir(root, rel string) (string, error) {
	p, st, err := Resolve(root, rel)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return "", refuse("%s is not a directory", rel)
	}
	return p, nil
}

// Open opens root/rel when it is a regular file inside root.
func Open(root, rel string) (*os.File, os.FileInfo, error) {
	p, st, err := Resolve(root, rel)
	if err != nil {
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, nil, refuse("%s is not a regular file (%s)", rel, st.Mode().Type())
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, nil, err
	}
	fst, err := f.Stat()
	if err != nil || !fst.Mode().IsRegular() {
		_ = f.Close()
		return nil, nil, refuse("%s changed while it was opened", rel)
	}
	return f, fst, nil
}

// ReadFile reads root/rel, a regular file inside root of at most max bytes.
func ReadFile(root, rel string, max int64) ([]byte, error) {
	f, st, err := Open(root, rel)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	if st.Size() > max {
		return nil, refuse("%s holds %d bytes, more than the %d read", rel, st.Size(), max)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, refuse("%s grew past %d bytes", rel, max)
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
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&os.ModeSymlink == 0 {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if err := staysInside(root, rel); err != nil {
			return err
		}
		return nil
	})
}

// staysInside resolves root/rel component by component, following every
// symlink on the way (as the kernel would), and refuses it when any step
// leaves root.
func staysInside(root, rel string) error {
	hops := 0
	_, err := resolveInside(root, rel, &hops)
	return err
}

func resolveInside(root, rel string, hops *int) (string, error) {
	clean := filepath.Clean(rel)
	if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return "", refuse("%s leads outside the workspace", rel)
	}
	if clean == "." {
		return "", nil
	}
	cur := ""
	parts := strings.Split(clean, string(filepath.Separator))
	for i, part := range parts {
		cand := filepath.Join(cur, part)
		st, err := os.Lstat(filepath.Join(root, cand))
		if err != nil {
			// Dangling from here on: it names nothing outside.
			return filepath.Join(append([]string{cand}, parts[i+1:]...)...), nil
		}
		if st.Mode()&os.ModeSymlink == 0 {
			cur = cand
			continue
		}
		if *hops++; *hops > maxLinkHops {
			return "", refuse("%s: more than %d links", rel, maxLinkHops)
		}
		target, err := os.Readlink(filepath.Join(root, cand))
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			return "", refuse("%s links to %s, outside the workspace", cand, target)
		}
		if cur, err = resolveInside(root, filepath.Join(filepath.Dir(cand), target), hops); err != nil {
			return "", refuse("%s links to %s: %v", cand, target, err)
		}
	}
	return cur, nil
}
