// Docker: tasks as containers through the Engine API.

package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/moby/profiles/seccomp"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
)

// Labels every mlrb container carries.
const (
	LabelManaged = "io.mlrb.managed"
	LabelHost    = "io.mlrb.host"
	LabelName    = "io.mlrb.name"
	// labelPrefix is put before a TaskSpec's own label keys.
	labelPrefix = "io.mlrb."
)

// Capabilities are all a task's container keeps of root's (Docker's
// default set has 14): enough for an agent to install packages and manage
// its own files and processes; no raw sockets, no device nodes, no
// chroot, no changing file capabilities.
var Capabilities = []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_SETGID", "CAP_SETUID"}

// Docker runs tasks as containers through the Docker Engine API.
type Docker struct {
	c    *client.Client
	host string
	// DeviceFiles passes a lease's GPUs as their device files
	// (/dev/nvidiaN) instead of a request to the NVIDIA toolkit.
	DeviceFiles bool
}

// NewDocker connects to the daemon (DOCKER_HOST or the local socket) and
// negotiates the API version (the client does by default).
func NewDocker(ctx context.Context, hostID string) (*Docker, error) {
	c, err := client.New(client.FromEnv)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	if _, err := c.Ping(ctx, client.PingOptions{}); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("docker daemon not reachable (DOCKER_HOST=%q): %w", os.Getenv("DOCKER_HOST"), err)
	}
	return &Docker{c: c, host: hostID}, nil
}

// Close releases the client.
func (d *Docker) Close() error { return d.c.Close() }

type dockerHandle struct {
	d    *Docker
	id   string
	name string
	door string // the door container's id ("": none)
	pid  int    // its first process, on the host
	done chan ExitResult
	sent sentSignals
	// mounted are the container paths not of its own layer: its binds
	// and its volumes' tmpfs.
	mounted []string
}

func (h *dockerHandle) ID() string              { return h.name }
func (h *dockerHandle) Wait() <-chan ExitResult { return h.done }
func (h *dockerHandle) Kill() error             { return h.Signal(syscall.SIGKILL) }
func (h *dockerHandle) HostPID() int            { return h.pid }
func (h *dockerHandle) OwnCgroup() bool         { return true }

// Destroy removes the container; it stays after exit so that its paths can
// be archived for the final checkpoint.
func (h *dockerHandle) Destroy() error {
	err := h.d.Remove(context.Background(), h.id)
	if h.door != "" {
		if derr := h.d.Remove(context.Background(), h.door); err == nil {
			err = derr
		}
	}
	if err != nil {
		return fmt.Errorf("remove container of %s: %w", h.name, err)
	}
	return nil
}
func (h *dockerHandle) Signal(s syscall.Signal) error {
	h.sent.add(s)
	_, err := h.d.c.ContainerKill(context.Background(), h.id, client.ContainerKillOptions{Signal: strconv.Itoa(int(s))})
	if err != nil && !strings.Contains(err.Error(), "is not running") {
		return fmt.Errorf("signal %s to %s: %w", s, h.name, err)
	}
	return nil
}

// ContainerName is the deterministic name of a task's container: the
// task name made safe for Docker, and a hash of it, so that two tasks
// never share a name (b/a/t/s1 and b_a_t_s1 read alike once made safe,
// and Start removes a container of its own name as a leftover).
func ContainerName(task string) string {
	safe := []byte(task)
	for i, c := range safe {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			safe[i] = '_'
		}
	}
	if len(safe) > 100 {
		safe = safe[:100]
	}
	sum := sha256.Sum256([]byte(task))
	return "mlrb_" + string(safe) + "_" + hex.EncodeToString(sum[:6])
}

// maskedPaths are Docker's own (an explicit list replaces them) and the
// kernel's config, which tells an agent what exploits the host kernel
// is open to.
var maskedPaths = []string{"/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
	"/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap", "/proc/config.gz"}

// refusedSyscalls are allowed by Docker's default profile but not here:
// io_uring (a large kernel surface, and it bypasses seccomp for the
// operations it queues) and ptrace (an agent has no debugger to attach).
var refusedSyscalls = []string{"io_uring_setup", "io_uring_enter", "io_uring_register", "ptrace"}

// seccompProfile is Docker's default profile (moby's own, the library
// the daemon ships) without refusedSyscalls, as the JSON the API takes.
var seccompProfile = sync.OnceValue(func() string {
	p := seccomp.DefaultProfile()
	for _, sc := range p.Syscalls {
		sc.Names = slices.DeleteFunc(sc.Names, func(n string) bool { return slices.Contains(refusedSyscalls, n) })
	}
	p.Syscalls = slices.DeleteFunc(p.Syscalls, func(sc *seccomp.Syscall) bool { return len(sc.Names) == 0 })
	b, err := json.Marshal(p)
	if err != nil {
		panic(fmt.Sprintf("runtime: the seccomp profile does not marshal: %v", err))
	}
	return string(b)
})

// gpuFiles are the device files of the GPUs ids, and the driver's shared
// control files the host has: what a container needs to use exactly them.
func gpuFiles(ids []string) []container.DeviceMapping {
	var out []container.DeviceMapping
	add := func(p string) {
		out = append(out, container.DeviceMapping{PathOnHost: p, PathInContainer: p, CgroupPermissions: "rwm"})
	}
	for _, id := range ids {
		add("/dev/nvidia" + id)
	}
	for _, p := range []string{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"} {
		if _, err := os.Stat(p); err == nil {
			add(p)
		}
	}
	return out
}

// Start creates and starts a container: never privileged, no new
// privileges, limits as given, GPU device requests for exactly the leased
// devices (none when the lease is empty). Its output goes to LogPath. The
// steps: the host config, the door (the network it joins), the mounts
// given to the task's user, the container made and started, its exit
// followed.
func (d *Docker) Start(ctx context.Context, spec TaskSpec) (Handle, error) {
	if spec.Image == "" {
		return nil, fmt.Errorf("start %s: no image", spec.Name)
	}
	mounts, err := d.volumeMounts(ctx, spec.Image)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.Name, err)
	}
	labels := map[string]string{LabelManaged: "true", LabelHost: d.host, LabelName: spec.Name}
	for k, v := range spec.Labels {
		labels[labelPrefix+k] = v
	}
	hc := d.hostConfig(spec, mounts)
	var door string
	if spec.Door != nil {
		if door, err = d.startDoor(ctx, spec, labels); err != nil {
			return nil, err
		}
		hc.NetworkMode = container.NetworkMode("container:" + door)
	}
	if spec.User != "" {
		if err := ownMounts(spec.Binds, spec.User); err != nil {
			d.removeDoor(door)
			return nil, fmt.Errorf("start %s: %w", spec.Name, err)
		}
	}
	name := ContainerName(spec.Name)
	// A container of the same name is a leftover of this very attempt:
	// it must not run twice.
	_, _ = d.c.ContainerRemove(ctx, name, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	created, err := d.c.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:       name,
		Config:     &container.Config{Image: spec.Image, Cmd: spec.Command, Env: containerEnv(spec), WorkingDir: spec.Dir, Labels: labels, User: spec.User},
		HostConfig: hc,
	})
	if err != nil {
		d.removeDoor(door)
		return nil, fmt.Errorf("create container for %s from %s: %w", spec.Name, spec.Image, err)
	}
	h := &dockerHandle{d: d, id: created.ID, name: spec.Name, door: door, done: make(chan ExitResult, 1), mounted: mountTargets(spec.Binds, mounts)}
	wait := d.c.ContainerWait(context.Background(), created.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	kills := d.watchKills(created.ID)
	if spec.Starting != nil {
		spec.Starting()
	}
	if _, err := d.c.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		kills.stop()
		_, _ = d.c.ContainerRemove(context.Background(), created.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		d.removeDoor(door)
		return nil, fmt.Errorf("start container %s: %w", name, err)
	}
	if in, err := d.c.ContainerInspect(ctx, created.ID, client.ContainerInspectOptions{}); err == nil && in.Container.State != nil {
		h.pid = in.Container.State.Pid
	}
	d.follow(h, spec, wait, kills)
	return h, nil
}

// containerEnv is the task's environment with the visible GPUs set
// whatever the image says: exactly the leased ones, or none ("void")
// under a default nvidia runtime.
func containerEnv(spec TaskSpec) []string {
	visible := "void"
	if len(spec.Devices) > 0 {
		visible = strings.Join(spec.deviceIDs(), ",")
	}
	return append(spec.envList(), "NVIDIA_VISIBLE_DEVICES="+visible)
}

// hostConfig is what the container may do and hold: no privileges, every
// capability dropped but Capabilities, a private cgroup namespace, the
// task's limits and exactly its leased devices.
func (d *Docker) hostConfig(spec TaskSpec, mounts []mount.Mount) *container.HostConfig {
	// An init process as PID 1 forwards signals (a process that is PID 1
	// itself ignores SIGTERM's default action) and reaps zombies.
	init := true
	hc := &container.HostConfig{
		Init:        &init,
		Binds:       spec.Binds,
		Privileged:  false,
		SecurityOpt: []string{"no-new-privileges", "seccomp=" + seccompProfile()},
		// Its own cgroup namespace: /proc/self/cgroup names no host path.
		CgroupnsMode: container.CgroupnsModePrivate,
		MaskedPaths:  maskedPaths,
		CapDrop:      []string{"ALL"},
		Mounts:       mounts,
		CapAdd:       Capabilities,
		// The daemon's own copy of the output, which the worker reads as
		// it comes: bounded whatever the daemon's default driver keeps.
		LogConfig: container.LogConfig{Type: "local", Config: map[string]string{"max-size": "32m", "max-file": "2"}},
		Resources: container.Resources{
			Memory:   spec.MemoryBytes,
			NanoCPUs: int64(spec.CPUs * 1e9),
		},
	}
	if spec.Network != "" {
		hc.NetworkMode = container.NetworkMode(spec.Network)
	}
	if spec.MemoryBytes > 0 {
		hc.Resources.MemorySwap = spec.MemoryBytes // no swap beyond the limit
	}
	if spec.PidsLimit > 0 {
		hc.Resources.PidsLimit = &spec.PidsLimit
	}
	if len(spec.Devices) > 0 && d.DeviceFiles {
		hc.Resources.Devices = gpuFiles(spec.deviceIDs())
	} else if len(spec.Devices) > 0 {
		hc.Resources.DeviceRequests = []container.DeviceRequest{{Driver: "nvidia", DeviceIDs: spec.deviceIDs(), Capabilities: [][]string{{"gpu"}}}}
	}
	return hc
}

// follow copies the started container's output to its log and, once it
// exits and its output is all copied, reports how it ended on h.done.
func (d *Docker) follow(h *dockerHandle, spec TaskSpec, wait client.ContainerWaitResult, kills *killWatch) {
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		d.copyLogs(h.id, spec.LogPath, spec.LogLimit, spec.Redact)
	}()
	go func() {
		var res ExitResult
		select {
		case w := <-wait.Result:
			res = ExitResult{ExitCode: int(w.StatusCode)}
			if w.Error != nil && w.Error.Message != "" {
				res.Err = errors.New(w.Error.Message)
			}
		case err := <-wait.Error:
			res = ExitResult{ExitCode: -1, Err: err}
		}
		if in, err := d.c.ContainerInspect(context.Background(), h.id, client.ContainerInspectOptions{}); err == nil && in.Container.State != nil {
			res.OOMKilled = in.Container.State.OOMKilled
		}
		kills.attribute(&res, &h.sent)
		<-logDone
		h.done <- res
		close(h.done)
	}()
}

func (d *Docker) copyLogs(id, path string, limit int64, secrets []string) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer func() { _ = f.Close() }()
	rc, err := d.c.ContainerLogs(context.Background(), id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Follow: true})
	if err != nil {
		return
	}
	defer func() { _ = rc.Close() }()
	out := Redacting(Capped(f, limit), secrets)
	_, _ = stdcopy.StdCopy(out, out, rc)
	_ = out.Close()
}

// Reap kills and removes every mlrb container of this host: after a
// worker restart none of them belongs to a live attempt any more.
func (d *Docker) Reap(ctx context.Context) (int, error) {
	tasks, err := d.Tasks(ctx)
	if err != nil {
		return 0, fmt.Errorf("reap: %w", err)
	}
	for i, t := range tasks {
		if err := d.Remove(ctx, t.ID); err != nil {
			return i, fmt.Errorf("reap: %w", err)
		}
	}
	return len(tasks), nil
}

// ImageDigest is the content digest of a local image (its id), recorded as
// provenance in place of the tag.
func (d *Docker) ImageDigest(ctx context.Context, ref string) (string, error) {
	in, err := d.c.ImageInspect(ctx, ref)
	if err != nil {
		return "", fmt.Errorf("image %s: %w (build or load it on this host first)", ref, err)
	}
	if len(in.RepoDigests) > 0 {
		return in.RepoDigests[0], nil
	}
	return in.ID, nil
}

// Task is a container this host runs, as listed for reconciliation.
type Task struct {
	ID     string
	Labels map[string]string
}

// Tasks lists this host's mlrb containers.
func (d *Docker) Tasks(ctx context.Context) ([]Task, error) {
	list, err := d.c.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: client.Filters{}.Add("label", LabelManaged+"=true", LabelHost+"="+d.host)})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	out := make([]Task, 0, len(list.Items))
	for _, c := range list.Items {
		out = append(out, Task{ID: c.ID, Labels: c.Labels})
	}
	return out, nil
}

// Remove kills and removes a container.
func (d *Docker) Remove(ctx context.Context, id string) error {
	if _, err := d.c.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !strings.Contains(err.Error(), "No such container") {
		return fmt.Errorf("remove container %.12s: %w", id, err)
	}
	return nil
}
