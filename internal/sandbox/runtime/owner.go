// ownMounts gives the sources of the bind mounts to user (uid[:gid]), so that a task running as that user can write its workspace and read what is.

package runtime

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ownMounts gives the sources of the bind mounts to user (uid[:gid]), so
// that a task running as that user can write its workspace and read what
// is mounted read-only (a model its agent saved 0600). Symlinks are
// changed themselves, never followed: the tree may hold what an earlier
// attempt of the agent left.
func ownMounts(binds []string, user string) error {
	uid, gid, err := parseUser(user)
	if err != nil {
		return err
	}
	for _, b := range binds {
		src, _, _ := strings.Cut(b, ":")
		err := filepath.WalkDir(src, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, uid, gid)
		})
		if err != nil {
			return fmt.Errorf("own %s to %s: %w", src, user, err)
		}
	}
	return nil
}

// parseUser reads uid[:gid]; without a gid, the group is the uid's
// number, as Docker does for a numeric user with no passwd entry.
func parseUser(user string) (int, int, error) {
	u, g, hasGroup := strings.Cut(user, ":")
	uid, err := strconv.Atoi(u)
	if err != nil || uid < 0 {
		return 0, 0, fmt.Errorf("user %q: not a numeric uid", user)
	}
	gid := uid
	if hasGroup {
		if gid, err = strconv.Atoi(g); err != nil || gid < 0 {
			return 0, 0, fmt.Errorf("user %q: not a numeric gid", user)
		}
	}
	return uid, gid, nil
}
