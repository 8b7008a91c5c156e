// ImageFiles: an image's regular files streamed from a container made of it, for review's provenance of weights.

package runtime

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// ImageFiles streams image's filesystem (from a container created of it,
// never started, so nothing of the image runs) and calls each with every
// regular file whose size want accepts; the rest is read past unhashed.
// The tar is the daemon's: names are data, never paths opened here.
func (d *Docker) ImageFiles(ctx context.Context, image string, want func(size int64) bool, each func(name string, size int64, r io.Reader) error) error {
	created, err := d.c.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config:     &container.Config{Image: image, Cmd: []string{"/mlrb-image-files"}, Labels: map[string]string{LabelManaged: "true", LabelHost: d.host}},
		HostConfig: &container.HostConfig{NetworkMode: "none"},
	})
	if err != nil {
		return fmt.Errorf("files of %s: %w", image, err)
	}
	defer func() {
		_, _ = d.c.ContainerRemove(context.WithoutCancel(ctx), created.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	}()
	out, err := d.c.ContainerExport(ctx, created.ID, client.ContainerExportOptions{})
	if err != nil {
		return fmt.Errorf("files of %s: %w", image, err)
	}
	defer func() { _ = out.Close() }()
	tr := tar.NewReader(out)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("files of %s: %w", image, err)
		}
		if h.Typeflag != tar.TypeReg || !want(h.Size) {
			continue
		}
		if err := each("/"+h.Name, h.Size, tr); err != nil {
			return fmt.Errorf("files of %s: %s: %w", image, h.Name, err)
		}
	}
}
