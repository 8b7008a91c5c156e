// The inode number of a data file on unix, which names it beside its hash.

//go:build unix

package evaldata

import (
	"os"
	"syscall"
)

func inode(st os.FileInfo) uint64 {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return s.Ino
	}
	return 0
}
