// A container's writable layer and its image's volumes, bounded.

package runtime

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
)

// VolumeBytes bounds each volume an image declares (VOLUME in its
// Dockerfile): the daemon would make it an anonymous volume on the
// host's disk, outside the workspace and the layer, so a tmpfs of this
// size is mounted there instead; its pages count against the
// container's memory limit. MaxVolumes bounds how many an image may
// declare.
const (
	VolumeBytes = 1 << 30
	MaxVolumes  = 16
)

// volumeMounts are the bounded tmpfs mounts over image's volumes.
func (d *Docker) volumeMounts(ctx context.Context, image string) ([]mount.Mount, error) {
	in, err := d.c.ImageInspect(ctx, image)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w (build or load it on this host first)", image, err)
	}
	if in.Config == nil || len(in.Config.Volumes) == 0 {
		return nil, nil
	}
	if n := len(in.Config.Volumes); n > MaxVolumes {
		return nil, fmt.Errorf("image %s declares %d volumes (VOLUME), over the %d mlrb mounts a bounded tmpfs over: declare fewer", image, n, MaxVolumes)
	}
	var out []mount.Mount
	for _, p := range slices.Sorted(maps.Keys(in.Config.Volumes)) {
		out = append(out, mount.Mount{Type: mount.TypeTmpfs, Target: p, TmpfsOptions: &mount.TmpfsOptions{SizeBytes: VolumeBytes, Mode: 0o1777}})
	}
	return out, nil
}

// LayerDir is a task's container's writable layer as a directory on
// this host ("" when the driver keeps it elsewhere, or the daemon is
// remote): the worker walks it as it walks a workspace, inodes counted.
func (d *Docker) LayerDir(ctx context.Context, task string) (string, error) {
	in, err := d.c.ContainerInspect(ctx, ContainerName(task), client.ContainerInspectOptions{})
	if err != nil {
		return "", fmt.Errorf("layer of %s: %w", task, err)
	}
	dir := ""
	if g := in.Container.GraphDriver; g != nil {
		dir = g.Data["UpperDir"]
	}
	if dir == "" && in.Container.State != nil && in.Container.State.Pid > 0 {
		// The containerd image store names no UpperDir: the container's
		// root mount does, to the host that runs it.
		if info, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", in.Container.State.Pid)); err == nil {
			dir = upperDir(string(info))
		}
	}
	if fi, err := os.Stat(dir); dir != "" && err == nil && fi.IsDir() {
		return dir, nil
	}
	return "", nil
}

// upperDir is the upperdir of the overlay mounted at / in a mountinfo
// ("": none).
func upperDir(mountinfo string) string {
	for _, line := range strings.Split(mountinfo, "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || f[4] != "/" || len(g) < 3 || g[0] != "overlay" {
			continue
		}
		for _, o := range strings.Split(g[2], ",") {
			if dir, ok := strings.CutPrefix(o, "upperdir="); ok {
				return strings.ReplaceAll(dir, "\\040", " ")
			}
		}
	}
	return ""
}

// LayerSize is the size of a task's container's writable layer (the
// daemon computes it: a walk of the layer, so it is asked seldom).
func (d *Docker) LayerSize(ctx context.Context, task string) (int64, error) {
	in, err := d.c.ContainerInspect(ctx, ContainerName(task), client.ContainerInspectOptions{Size: true})
	if err != nil {
		return 0, fmt.Errorf("layer of %s: %w", task, err)
	}
	if in.Container.SizeRw == nil {
		return 0, nil
	}
	return *in.Container.SizeRw, nil
}
