// Seed copies paths of image (what the image ships under /app, say) into root on this host, root/<path> for each path, once, before the first attempt.

package runtime

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/mlrb/mlrb/internal/store/safefs"
)

// Seed copies paths of image (what the image ships under /app, say) into
// root on this host, root/<path> for each path, once, before the first
// attempt of a run: from then on the attempt's container mounts them from
// there and its checkpoints read them as plain files. A path the image
// lacks is left out.
func (d *Docker) Seed(ctx context.Context, image string, paths []string, root string) error {
	// Created, never started: only its filesystem is read.
	created, err := d.c.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config:     &container.Config{Image: image, Cmd: []string{"/mlrb-seed"}, Labels: map[string]string{LabelManaged: "true", LabelHost: d.host}},
		HostConfig: &container.HostConfig{},
	})
	if err != nil {
		return fmt.Errorf("seed from %s: %w", image, err)
	}
	defer func() {
		_, _ = d.c.ContainerRemove(context.WithoutCancel(ctx), created.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	}()
	for _, p := range paths {
		res, err := d.c.CopyFromContainer(ctx, created.ID, client.CopyFromContainerOptions{SourcePath: p})
		if err != nil {
			if strings.Contains(err.Error(), "No such container:path") || strings.Contains(err.Error(), "Could not find the file") {
				continue
			}
			return fmt.Errorf("seed %s from %s: %w", p, image, err)
		}
		// Docker names the entries from the path's base.
		err = safefs.ExtractTar(res.Content, filepath.Join(root, filepath.FromSlash(path.Dir(p))))
		_ = res.Content.Close()
		if err != nil {
			return fmt.Errorf("seed %s from %s: %w", p, image, err)
		}
	}
	return nil
}
