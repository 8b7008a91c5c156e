// BuildImage builds an image from a Dockerfile and local files (name in the context -> host path) through the Engine API.

package runtime

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/moby/moby/client"
)

// BuildImage builds an image from a Dockerfile and local files (name in
// the context -> host path) through the Engine API; with FROM scratch and
// static binaries it needs no registry.
func BuildImage(ctx context.Context, d *Docker, tag string, files map[string]string, dockerfile string) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name string, mode int64, body []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(body))}); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	if err := add("Dockerfile", 0o644, []byte(dockerfile)); err != nil {
		return err
	}
	for name, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("build %s: %w", tag, err)
		}
		if err := add(name, 0o755, b); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	res, err := d.c.ImageBuild(ctx, &buf, client.ImageBuildOptions{Tags: []string{tag}, Remove: true, ForceRemove: true})
	if err != nil {
		return fmt.Errorf("build %s: %w", tag, err)
	}
	defer func() { _ = res.Body.Close() }()
	// The build reports failures inside its JSON stream.
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var msg struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(sc.Bytes(), &msg) == nil && msg.Error != "" {
			return fmt.Errorf("build %s: %s", tag, msg.Error)
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("build %s: %w", tag, err)
	}
	return nil
}
