package app

import (
	"runtime/debug"
	"strings"
	"sync"

	"go.temporal.io/sdk/worker"
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

// buildChecksum is what the process's workers record as their binary
// checksum: the name of a build that has one (a module version, a clean
// commit); false for one its bytes alone tell apart (a dirty tree's, or
// one without version control information).
func buildChecksum(version string) (string, bool) {
	if version == "devel" || version == "unknown" || strings.HasSuffix(version, "+dirty") {
		return "", false
	}
	return "mlrb@" + version, true
}

// nameBuild gives the Temporal SDK's workers in this process (mlrb's and
// the embedded server's own) the build's name as their binary checksum.
// Left unset, the SDK hashes the running executable, 265 MB with the
// server in it: 0.6 s of CPU at every worker and dev server start.
var nameBuild = sync.OnceFunc(func() {
	if sum, ok := buildChecksum(Version()); ok {
		worker.SetBinaryChecksum(sum)
	}
})
