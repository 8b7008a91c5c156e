// The agent's door container: its one way out.

package runtime

import (
	"context"
	"fmt"
	"maps"
	"os"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// doorWait bounds how long a door may take to open: a static binary
// that listens at once.
const doorWait = 30 * time.Second

// startDoor starts a task's door: no network but loopback, which the task
// will share; no capability, a read-only root, small limits; its only
// mount the worker's socket dir. It returns once the relay accepts.
func (d *Docker) startDoor(ctx context.Context, spec TaskSpec, labels map[string]string) (string, error) {
	name := ContainerName(spec.Name) + "_door"
	_, _ = d.c.ContainerRemove(ctx, name, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	_ = os.Remove(spec.Door.Ready)
	dl := maps.Clone(labels)
	dl[labelPrefix+LabelRole] = "door"
	init, mem, pids := true, int64(64<<20), int64(64)
	created, err := d.c.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:   name,
		Config: &container.Config{Image: spec.Door.Image, Cmd: spec.Door.Command, Labels: dl, Env: []string{"NVIDIA_VISIBLE_DEVICES=void"}},
		HostConfig: &container.HostConfig{Init: &init, Binds: spec.Door.Binds, NetworkMode: NetworkNone, ReadonlyRootfs: true,
			SecurityOpt: []string{"no-new-privileges"}, CapDrop: []string{"ALL"},
			Resources: container.Resources{Memory: mem, MemorySwap: mem, PidsLimit: &pids}},
	})
	if err != nil {
		return "", fmt.Errorf("create the door of %s from %s: %w", spec.Name, spec.Door.Image, err)
	}
	if _, err := d.c.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		d.removeDoor(created.ID)
		return "", fmt.Errorf("start the door of %s: %w", spec.Name, err)
	}
	deadline := time.Now().Add(doorWait)
	for {
		if _, err := os.Stat(spec.Door.Ready); err == nil {
			return created.ID, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			d.removeDoor(created.ID)
			return "", fmt.Errorf("the door of %s did not open within %s", spec.Name, doorWait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d *Docker) removeDoor(id string) {
	if id != "" {
		_ = d.Remove(context.Background(), id)
	}
}
