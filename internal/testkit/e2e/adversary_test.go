package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/procfs"

	"github.com/mlrb/mlrb/internal/sandbox/runtime"
)

// adversaryImage is the hostile agent of the sandbox audits: the
// runtime's test subject with no command of its own; each agent
// definition picks its attack (testtask adversary MODE). Its VOLUME
// twin declares a volume, as an image agent may.
const (
	adversaryImage = "mlrb-adversary:e2e"
	volumeImage    = "mlrb-adversary-volume:e2e"
)

// adversaries are the attacks that need a container, each with the
// outcome that is the agent's own and what its reason must name.
var adversaries = []struct {
	mode, image, outcome, reason string
}{
	{"cmdline", adversaryImage, "scored", ""},                                        // H1: the worker outlasts it
	{"deep", adversaryImage, "agent_failed", "than 512"},                             // H2
	{"longpath", adversaryImage, "agent_failed", "longer than a restore can create"}, // H4, M5
	{"refused", adversaryImage, "agent_failed", "gateway.max_refused"},               // H3
	{"bigrefused", adversaryImage, "agent_failed", "gateway.max_refused_mb"},         // H2 (b76b22e): bytes, and a 429 storm
	{"volume", volumeImage, "scored", ""},                                            // M4: a bounded tmpfs
	{"empties", adversaryImage, "agent_failed", "agent.workspace_max_entries"},       // M4: the layer's inodes
}

// TestAdversaries runs every attack at once on one worker, each as the
// agent of its own run: every run ends as its agent made it end (never
// infra_failed or evaluation_failed), and the worker's resident memory
// stays under 1 GiB throughout. One image, one worker, the attacks in
// parallel: the suite costs the slowest attack's time.
func TestAdversaries(t *testing.T) {
	parallel(t)
	buildAdversaries(t)
	defs := map[string]string{}
	for _, a := range adversaries {
		defs["adv-"+a.mode] = "image: " + a.image + "\nprovider: openai\nargs: [/testtask, adversary, " + a.mode + "]\n"
	}
	e := containerAgentEnv(t, "MLRB_AGENTS_DIR="+agentDefs(t, defs), "MLRB_HOST_MAX_AGENTS=7",
		"MLRB_AGENT_WORKSPACE_MAX_ENTRIES=5000", "MLRB_GATEWAY_MAX_REFUSED=500", "MLRB_GATEWAY_MAX_REFUSED_MB=1024")
	volumesBefore := dockerVolumes(t)
	// The attacks run at once inside this test's slot, not as parallel
	// subtests: those wait for slots of their own behind the whole suite
	// while this test's worker idles.
	t.Run("attacks", func(t *testing.T) {
		var wg sync.WaitGroup
		for _, a := range adversaries {
			wg.Go(func() {
				t.Run(a.mode, func(t *testing.T) {
					se := *e
					se.t, se.timeout = t, 5*time.Minute
					var res result
					se.starterJSON(&res, "run", "--task", "e2e_container", "--agent", "adv-"+a.mode, "--seed", "1", "--time-limit", "150s", "--wait", "--json")
					if res.Outcome != a.outcome || !strings.Contains(res.Reason, a.reason) {
						logs, _, _ := se.starter("logs", res.RunID)
						t.Fatalf("%s: %s (%s); want %s naming %q\nagent log:\n%s", a.mode, res.Outcome, res.Reason, a.outcome, a.reason, logs)
					}
					if a.mode == "volume" {
						if logs, _, _ := se.starter("logs", res.RunID); !strings.Contains(logs, "mount: /scratch tmpfs") {
							t.Fatalf("the image's volume is not a tmpfs:\n%s", logs)
						}
					}
					t.Logf("%s: %s %s", a.mode, res.Outcome, res.Reason)
				})
			})
		}
		wg.Wait()
	})
	if p := peakRSS(t, e.worker.cmd.Process.Pid); p > 1<<30 {
		t.Fatalf("the worker's resident memory peaked at %d MiB under the attacks", p>>20)
	} else {
		t.Logf("worker peak RSS %d MiB", p>>20)
	}
	if after := dockerVolumes(t); len(after) > len(volumesBefore) {
		t.Fatalf("the attacks left docker volumes: %v (before: %v)", after, volumesBefore)
	}
}

// buildAdversaries builds the hostile image, once per test binary, and
// its VOLUME twin. /tmp is the agent user's (as in most images), so that
// what it writes there lands in the container's own layer.
func buildAdversaries(t *testing.T) {
	t.Helper()
	testtask := staticBinary(t, "internal/sandbox/runtime/testdata/testtask")
	d := docker(t)
	buildMu.Lock()
	defer buildMu.Unlock()
	if _, ok := built[adversaryImage]; ok {
		return
	}
	keep := filepath.Join(t.TempDir(), "keep")
	if err := os.WriteFile(keep, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := runtime.BuildImage(ctx, d, adversaryImage, map[string]string{"testtask": testtask, "keep": keep},
		"FROM scratch\nCOPY testtask /testtask\nCOPY --chown=65532:65532 keep /tmp/keep\n"); err != nil {
		t.Fatal(err)
	}
	if err := runtime.BuildImage(ctx, d, volumeImage, nil, "FROM "+adversaryImage+"\nVOLUME /scratch\n"); err != nil {
		t.Fatal(err)
	}
	built[adversaryImage] = ""
}

// peakRSS is a live process's peak resident memory since it started
// (VmHWM): the kernel's own high-water mark, no sample missed.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	p, err := procfs.NewProc(pid)
	if err != nil {
		t.Fatalf("process %d: %v", pid, err)
	}
	st, err := p.NewStatus()
	if err != nil {
		t.Fatalf("process %d: %v", pid, err)
	}
	return int64(st.VmHWM)
}

func dockerVolumes(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("docker", "volume", "ls", "-q").Output()
	if err != nil {
		t.Fatalf("docker volume ls: %v", err)
	}
	return strings.Fields(string(out))
}
