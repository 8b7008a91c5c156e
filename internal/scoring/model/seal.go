// Seal makes the model the evaluator loads.

package model

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Seal makes the model the evaluator loads: a copy of the model dir
// (hard links where the filesystem allows) holding only directories and
// regular files. A link in the dir is replaced by the file it leads to
// (CheckLinks has kept it inside the workspace: a Hugging Face cache's
// snapshot is made of such links); one that leads nowhere, or to a
// directory, and anything not a file (a device, a pipe) is refused: in
// the evaluator's container, where the dir is mounted alone, it would
// lead elsewhere (model.json -> ../dev/zero is /dev/zero there). What the
// check reads and the evaluator loads are then the same files. The tree
// is the worker's own restore of a checkpoint, which no agent writes.
func Seal(dir, sealed string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		dst := filepath.Join(sealed, rel)
		switch t := d.Type(); {
		case d.IsDir():
			return os.MkdirAll(dst, 0o755)
		case t&fs.ModeSymlink != 0:
			target, err := filepath.EvalSymlinks(p)
			if err != nil {
				return fmt.Errorf("the model's %s is a link that leads nowhere here (%w): in the evaluator it would lead elsewhere", rel, errors.Unwrap(err))
			}
			st, err := os.Stat(target)
			switch {
			case err != nil:
				return fmt.Errorf("the model's %s: %w", rel, err)
			case !st.Mode().IsRegular():
				return fmt.Errorf("the model's %s is a link to a %s, not to a file", rel, kind(st.Mode()))
			}
			return place(target, dst)
		case t.IsRegular():
			return place(p, dst)
		default:
			return fmt.Errorf("the model's %s is a %s, not a file", rel, kind(t))
		}
	})
}

// place puts src at dst: a hard link, else a copy.
func place(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeDevice != 0:
		return "device"
	case m&fs.ModeNamedPipe != 0:
		return "pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	}
	return "special file"
}
