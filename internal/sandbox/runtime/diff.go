// Differ is a task whose writes outside its mounts the runtime can list.

package runtime

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
)

// Differ is a task whose writes outside its mounts the runtime can list.
type Differ interface {
	// Changes are the files the task itself wrote, added or deleted in
	// its own filesystem layer (`docker diff`), sorted: not its mounts,
	// not what the runtime put there, not a directory listed only for
	// what changed under it.
	Changes(ctx context.Context) ([]string, error)
}

// runtimeMade are what Docker itself puts in a container's filesystem:
// its init, its name and resolver files, the kernel's trees.
var runtimeMade = []string{"/sbin/docker-init", "/etc/hosts", "/etc/hostname", "/etc/resolv.conf", "/.dockerenv", "/dev", "/proc", "/sys"}

// Changes lists what the task wrote outside its mounts.
func (h *dockerHandle) Changes(ctx context.Context) ([]string, error) {
	res, err := h.d.c.ContainerDiff(ctx, h.id, client.ContainerDiffOptions{})
	if err != nil {
		return nil, fmt.Errorf("changes of %s: %w", h.name, err)
	}
	all := make([]string, 0, len(res.Changes))
	for _, c := range res.Changes {
		all = append(all, c.Path)
	}
	return ownWrites(all, append(slices.Clone(h.mounted), runtimeMade...)), nil
}

// ownWrites are the leaves of changed, sorted, that are neither one of
// skip nor a directory on the way to one.
func ownWrites(changed, skip []string) []string {
	all := slices.Sorted(slices.Values(changed))
	var out []string
	for i, p := range all {
		if onTheWayTo(p, skip) || i+1 < len(all) && strings.HasPrefix(all[i+1], strings.TrimSuffix(p, "/")+"/") {
			continue
		}
		out = append(out, p)
	}
	return out
}

// onTheWayTo: p is one of targets or a directory above one (made for it).
func onTheWayTo(p string, targets []string) bool {
	for _, t := range targets {
		if p == t || strings.HasPrefix(t, strings.TrimSuffix(p, "/")+"/") {
			return true
		}
	}
	return false
}

// mountTargets are the container paths of binds (host:container[:opts])
// and mounts.
func mountTargets(binds []string, mounts []mount.Mount) []string {
	out := make([]string, 0, len(binds)+len(mounts))
	for _, b := range binds {
		if parts := strings.Split(b, ":"); len(parts) >= 2 {
			out = append(out, parts[1])
		}
	}
	for _, m := range mounts {
		out = append(out, m.Target)
	}
	return out
}
