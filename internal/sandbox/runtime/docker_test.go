package runtime

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"

	"github.com/mlrb/mlrb/internal/testkit/testenv"
	"github.com/moby/moby/client"
)

const testImage = "mlrb-testtask:dev"

var buildOnce sync.Once
var buildErr error

func docker(t *testing.T) *Docker {
	t.Helper()
	d, err := NewDocker(context.Background(), "test-"+strings.ToLower(t.Name()))
	if err != nil {
		testenv.Missing(t, err.Error())
	}
	t.Cleanup(func() {
		_, _ = d.Reap(context.Background())
		_ = d.Close()
	})
	buildOnce.Do(func() { buildErr = buildTestImage(d) })
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return d
}

// buildTestImage compiles testtask statically and builds a FROM scratch
// image of it through the Engine API: nothing is pulled.
func buildTestImage(d *Docker) error {
	dir, err := os.MkdirTemp("", "mlrb-testtask-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	bin := filepath.Join(dir, "testtask")
	cmd := exec.Command("go", "build", "-o", bin, "./testdata/testtask")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build testtask: %v: %s", err, out)
	}
	return BuildImage(context.Background(), d, testImage, map[string]string{"testtask": bin},
		"FROM scratch\nCOPY testtask /testtask\nENTRYPOINT [\"/testtask\"]\n")
}

func run(t *testing.T, d *Docker, name string, spec TaskSpec) (Handle, string) {
	t.Helper()
	log := filepath.Join(t.TempDir(), "log")
	spec.Name, spec.Image, spec.LogPath = name, testImage, log
	h, err := d.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return h, log
}

func waitFor(t *testing.T, h Handle) ExitResult {
	t.Helper()
	select {
	case r := <-h.Wait():
		return r
	case <-time.After(60 * time.Second):
		t.Fatal("container did not end")
	}
	return ExitResult{}
}

func TestDockerExitEnvAndLogs(t *testing.T) {
	d := docker(t)
	h, log := run(t, d, "env", TaskSpec{Command: []string{"env"}, Env: map[string]string{"MLRB_TASK": "mini_baby_lm"}})
	if r := waitFor(t, h); !r.Successful() {
		t.Fatalf("exit = %+v", r)
	}
	out, _ := os.ReadFile(log)
	if !strings.Contains(string(out), "MLRB_TASK=mini_baby_lm") {
		t.Fatalf("log = %q", out)
	}
	h, _ = run(t, d, "exit3", TaskSpec{Command: []string{"exit", "3"}})
	if r := waitFor(t, h); r.ExitCode != 3 || r.Successful() {
		t.Fatalf("exit = %+v", r)
	}
}

func TestDockerNoPrivilegesNoDevices(t *testing.T) {
	d := docker(t)
	h, _ := run(t, d, "inspect-me", TaskSpec{Command: []string{"sleep", "30"}, MemoryBytes: 64 << 20, PidsLimit: 32, Labels: map[string]string{"run": "r1"}})
	in, err := d.c.ContainerInspect(context.Background(), ContainerName("inspect-me"), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hc := in.Container.HostConfig
	if hc.Privileged || len(hc.DeviceRequests) != 0 || hc.Memory != 64<<20 || in.Container.Config.Labels["io.mlrb.run"] != "r1" {
		t.Fatalf("host config: privileged %v, devices %v, memory %d, labels %v", hc.Privileged, hc.DeviceRequests, hc.Memory, in.Container.Config.Labels)
	}
	if !slices.Equal(hc.CapDrop, []string{"ALL"}) || !slices.Equal(hc.CapAdd, Capabilities) {
		t.Fatalf("capabilities: drop %v add %v; want all dropped but %v", hc.CapDrop, hc.CapAdd, Capabilities)
	}
	// No lease, no GPU: set explicitly, whatever the image's own env says.
	if !slices.Contains(in.Container.Config.Env, "NVIDIA_VISIBLE_DEVICES=void") {
		t.Fatalf("env %v: want NVIDIA_VISIBLE_DEVICES=void", in.Container.Config.Env)
	}
	_ = h.Kill()
	waitFor(t, h)
}

// TestDockerGPUDeviceFiles: with DeviceFiles a lease's GPUs reach the
// container as their device files (the Slurm GRES of the test cluster are
// such files, with no driver): exactly the leased one, and NVIDIA's
// variable names it.
func TestDockerGPUDeviceFiles(t *testing.T) {
	if _, err := os.Stat("/dev/nvidia1"); err != nil {
		testenv.Missing(t, "no /dev/nvidia1: bash .ci/slurm makes the test cluster's fake GPU device files")
	}
	d := docker(t)
	d.DeviceFiles = true
	h, _ := run(t, d, "gpu-files", TaskSpec{Command: []string{"sleep", "30"}, Devices: []int{1}})
	in, err := d.c.ContainerInspect(context.Background(), ContainerName("gpu-files"), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hc := in.Container.HostConfig
	if len(hc.DeviceRequests) != 0 || len(hc.Devices) == 0 || hc.Devices[0].PathOnHost != "/dev/nvidia1" || slices.ContainsFunc(hc.Devices, func(m container.DeviceMapping) bool { return m.PathOnHost == "/dev/nvidia0" }) {
		t.Fatalf("devices %+v, requests %+v: want /dev/nvidia1 alone", hc.Devices, hc.DeviceRequests)
	}
	if !slices.Contains(in.Container.Config.Env, "NVIDIA_VISIBLE_DEVICES=1") {
		t.Fatalf("env %v", in.Container.Config.Env)
	}
	_ = h.Kill()
	waitFor(t, h)
}

// TestDockerKernelSurface (audit N7): io_uring and ptrace are refused by
// mlrb's seccomp profile (Docker's default allowed both), the cgroup
// namespace is the container's own, and the kernel's config is masked.
func TestDockerKernelSurface(t *testing.T) {
	d := docker(t)
	h, log := run(t, d, "kernel", TaskSpec{Command: []string{"kernel"}})
	if r := waitFor(t, h); r.ExitCode != 0 {
		t.Fatalf("exit %+v", r)
	}
	b, _ := os.ReadFile(log)
	out := string(b)
	for _, want := range []string{"io_uring_setup: operation not permitted", "ptrace: operation not permitted", "config.gz bytes: 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "docker") || regexp.MustCompile(`[0-9a-f]{64}`).MatchString(out) {
		t.Errorf("the container's cgroup paths name it on the host:\n%s", out)
	}
}

func TestDockerStopWithGrace(t *testing.T) {
	d := docker(t)
	h, _ := run(t, d, "sleeper", TaskSpec{Command: []string{"sleep", "60"}})
	time.Sleep(300 * time.Millisecond)
	if err := h.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if r := waitFor(t, h); r.Signal != int(syscall.SIGTERM) {
		t.Fatalf("after SIGTERM: %+v", r)
	}
	h, log := run(t, d, "stubborn", TaskSpec{Command: []string{"ignore-term"}})
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if b, _ := os.ReadFile(log); bytes.Contains(b, []byte("ignoring")) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := h.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-h.Wait():
		t.Fatalf("a task that ignores SIGTERM ended on it: %+v", r)
	case <-time.After(time.Second):
	}
	if err := h.Kill(); err != nil {
		t.Fatal(err)
	}
	if r := waitFor(t, h); r.Signal != int(syscall.SIGKILL) {
		t.Fatalf("after kill: %+v", r)
	}
}

func TestDockerOOMKilled(t *testing.T) {
	d := docker(t)
	h, _ := run(t, d, "hog", TaskSpec{Command: []string{"alloc", "512"}, MemoryBytes: 64 << 20})
	if r := waitFor(t, h); !r.OOMKilled || r.Successful() {
		t.Fatalf("exit = %+v, want OOM killed", r)
	}
}

func TestDockerReap(t *testing.T) {
	d := docker(t)
	h, _ := run(t, d, "orphan", TaskSpec{Command: []string{"sleep", "60"}})
	restarted, err := NewDocker(context.Background(), d.host)
	if err != nil {
		t.Fatal(err)
	}
	n, err := restarted.Reap(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("Reap = %d, %v", n, err)
	}
	waitFor(t, h)
}

// TestDockerWhoEndedIt is audit #7: an exit code past 128 was read as a
// signal from outside, so an agent that chose exit(137) was handed back
// as an infra loss. The daemon's kill events tell them apart: its own
// exit is no signal, the handle's own kill is not from outside, and an
// operator's docker kill is.
func TestDockerWhoEndedIt(t *testing.T) {
	d := docker(t)
	h, _ := run(t, d, "exits-137", TaskSpec{Command: []string{"exit", "137"}})
	if r := waitFor(t, h); r.ExitCode != 137 || r.Signal != 0 || r.KilledOutside {
		t.Errorf("exit 137 of its own: %+v", r)
	}
	_ = h.Destroy()

	h, _ = run(t, d, "killed-by-us", TaskSpec{Command: []string{"sleep", "60"}})
	time.Sleep(300 * time.Millisecond)
	if err := h.Kill(); err != nil {
		t.Fatal(err)
	}
	if r := waitFor(t, h); r.Signal != int(syscall.SIGKILL) || r.KilledOutside {
		t.Errorf("our own kill: %+v", r)
	}
	_ = h.Destroy()

	h, _ = run(t, d, "killed-outside", TaskSpec{Command: []string{"sleep", "60"}})
	time.Sleep(300 * time.Millisecond)
	if out, err := exec.Command("docker", "kill", ContainerName("killed-outside")).CombinedOutput(); err != nil {
		t.Fatalf("docker kill: %v %s", err, out)
	}
	if r := waitFor(t, h); r.Signal != int(syscall.SIGKILL) || !r.KilledOutside {
		t.Errorf("an operator's docker kill: %+v", r)
	}
	_ = h.Destroy()
}

func TestContainerNamesAreOneTasksOwn(t *testing.T) {
	a, b := ContainerName("agent-b%2Fa%2Ft%2Fs1-1"), ContainerName("agent-b_2Fa_2Ft_2Fs1-1")
	if a == b || !strings.HasPrefix(a, "mlrb_agent-b_2Fa_2Ft_2Fs1-1_") {
		t.Fatalf("names %s and %s", a, b)
	}
}

// Audit M4: an image's VOLUME is a bounded tmpfs, never an anonymous
// volume on the host's disk outside every limit; an image declaring
// more than MaxVolumes is refused; the writable layer is a directory
// the worker can walk, so its empty files (inodes) count.
func TestDockerVolumesAndLayerAreBounded(t *testing.T) {
	d := docker(t)
	ctx := context.Background()
	const volImage = "mlrb-testtask-volume:dev"
	if err := BuildImage(ctx, d, volImage, nil, "FROM "+testImage+"\nVOLUME /scratch\n"); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "log")
	h, err := d.Start(ctx, TaskSpec{Name: "vol", Image: volImage, LogPath: log, Command: []string{"empties", "/scratch", "10"}})
	if err != nil {
		t.Fatal(err)
	}
	if r := waitFor(t, h); !r.Successful() {
		t.Fatalf("exit = %+v", r)
	}
	out, _ := os.ReadFile(log)
	if !strings.Contains(string(out), "mount: /scratch tmpfs") || !strings.Contains(string(out), "size=1048576k") {
		t.Fatalf("the image's volume is not a 1 GiB tmpfs:\n%s", out)
	}

	h, _ = run(t, d, "layer", TaskSpec{Command: []string{"empties", "/var/junk", "1000"}})
	if r := waitFor(t, h); !r.Successful() {
		t.Fatalf("exit = %+v", r)
	}
	dir, err := d.LayerDir(ctx, "layer")
	if err != nil || dir == "" {
		t.Fatalf("the layer is not a directory on this host: %q, %v", dir, err)
	}
	if names, err := os.ReadDir(filepath.Join(dir, "var", "junk")); err != nil || len(names) < 1000 {
		t.Fatalf("the layer's empty files: %d, %v", len(names), err)
	}

	many := "FROM " + testImage + "\n"
	for i := range MaxVolumes + 1 {
		many += fmt.Sprintf("VOLUME /v%d\n", i)
	}
	if err := BuildImage(ctx, d, "mlrb-testtask-volumes:dev", nil, many); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Start(ctx, TaskSpec{Name: "vols", Image: "mlrb-testtask-volumes:dev", LogPath: log, Command: []string{"exit", "0"}}); err == nil || !strings.Contains(err.Error(), "volumes") {
		t.Fatalf("an image of %d volumes: %v", MaxVolumes+1, err)
	}
}

// Under the containerd image store the daemon names no UpperDir: the
// container's root overlay in its mountinfo does.
func TestUpperDirFromMountinfo(t *testing.T) {
	info := "22 1 0:21 / / rw,relatime - overlay overlay rw,lowerdir=/var/lib/c/l1:/var/lib/c/l2,upperdir=/var/lib/c/snapshots/9/fs,workdir=/var/lib/c/snapshots/9/work\n" +
		"23 22 0:22 / /proc rw - proc proc rw\n"
	if got := upperDir(info); got != "/var/lib/c/snapshots/9/fs" {
		t.Fatalf("upperDir = %q", got)
	}
	if got := upperDir("23 22 0:22 / / rw - fuse.fuse-overlayfs fuse-overlayfs rw\n"); got != "" {
		t.Fatalf("a root with no overlay upperdir: %q", got)
	}
}
