// The build's version.

package app

import (
	"debug/elf"
	"os"
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
// checksum: the build's name when it has one (a module version, a clean
// commit), else that name and the Go build ID the toolchain derived from
// the executable's contents (a dirty tree's build, one made without
// version control information); false when neither tells it apart.
func buildChecksum(version, goBuildID string) (string, bool) {
	named := version != "devel" && version != "unknown" && !strings.HasSuffix(version, "+dirty")
	switch {
	case named:
		return "mlrb@" + version, true
	case goBuildID != "":
		return "mlrb@" + version + "/" + goBuildID, true
	}
	return "", false
}

// goBuildID reads the Go build ID from the running executable's ELF note
// (a few hundred bytes), "" where there is none.
func goBuildID() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	f, err := elf.Open(exe)
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	sec := f.Section(".note.go.buildid")
	if sec == nil {
		return ""
	}
	note, err := sec.Data()
	if err != nil || len(note) < 16 {
		return ""
	}
	// An ELF note: name size, description size, type, the name ("Go",
	// padded to 4 bytes), then the description, the build ID.
	nameSize, descSize := f.ByteOrder.Uint32(note[0:]), f.ByteOrder.Uint32(note[4:])
	at := 12 + (uint64(nameSize)+3)&^3
	if at+uint64(descSize) > uint64(len(note)) {
		return ""
	}
	return string(note[at : at+uint64(descSize)])
}

// nameBuild gives the Temporal SDK's workers in this process (mlrb's and
// the embedded server's own) the build's name as their binary checksum.
// Left unset, the SDK hashes the running executable, 265 MB with the
// server in it: 0.6 s of CPU at every worker and dev server start.
var nameBuild = sync.OnceFunc(func() {
	v := Version()
	sum, ok := buildChecksum(v, "")
	if !ok {
		sum, ok = buildChecksum(v, goBuildID())
	}
	if ok {
		worker.SetBinaryChecksum(sum)
	}
})
