package app

import (
	"runtime/debug"
	"strings"
)

// Version names this build: the module's version, or the commit it was
// built from (and "+dirty" when the tree had changes), as Go records it.
func Version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	if rev == "" {
		return "devel"
	}
	v := rev[:min(12, len(rev))]
	if dirty {
		v += "+dirty"
	}
	return strings.TrimSpace(v)
}
