// An attempt's observation: its processes, GPUs and checkpoints as sampled, kept in the store.

// Package observe watches an agent's research from the harness side, for
// any agent under any runtime: the processes it runs (sampled from the
// host's /proc, within its container's cgroup or its process tree), the
// leased GPUs (through a query command such as nvidia-smi) and what each
// checkpoint adds. An attempt's observation is kept in the blob store
// beside its transcript; experiments and measures are derived from it
// (Derive), never sent to the workflow sample by sample.
package observe

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/keys"
)

// Observation is one attempt's, as sampled: its processes, the GPU
// samples of its leased devices and what its checkpoints added.
type Observation struct {
	RunID   string `json:"run_id"`
	Attempt int    `json:"attempt"`
	// Start is when sampling began, at StartAgentS of the run's agent
	// time (the budget its earlier attempts used): agent time at a
	// moment t is StartAgentS + (t - Start).
	Start       time.Time `json:"start"`
	StartAgentS float64   `json:"start_agent_s"`
	// End is the last sample's time; Ended how the attempt ended (an
	// AgentResult's stopped_by, or EndedHandedBack), "" while it runs or
	// when its worker was lost.
	End   time.Time `json:"end"`
	Ended string    `json:"ended,omitempty"`
	// StopAt is when the harness began to stop the agent (its deadline,
	// a hand-back, a cancel): what ran then was cut off.
	StopAt time.Time `json:"stop_at,omitempty"`
	// Devices are the leased GPUs, the only ones sampled.
	Devices []int `json:"devices,omitempty"`
	// OOMKnown: the runtime reports its cgroup's OOM kills (a container
	// does, a process tree does not).
	OOMKnown    bool             `json:"oom_known"`
	Procs       []Proc           `json:"procs"`
	GPU         []GPUSample      `json:"gpu,omitempty"`
	Checkpoints []CheckpointAdds `json:"checkpoints,omitempty"`
	// Calls are the gateway's LLM calls of the attempt, as wall time.
	Calls []Span `json:"calls,omitempty"`
	// Dropped counts processes not kept past MaxProcs.
	Dropped int `json:"dropped,omitempty"`
}

// How an attempt ended, besides an AgentResult's stopped_by.
const EndedHandedBack = "handed_back"

// Proc is one process the agent ran, as its samples saw it.
type Proc struct {
	PID  int `json:"pid"`
	PPID int `json:"ppid"`
	// Root: the agent's own first process.
	Root bool `json:"root,omitempty"`
	// Command is its command line as last seen (a process that execs
	// shows what it ran last), secrets scrubbed, capped at MaxCommand
	// bytes: what the agent ran, kept as data.
	Command string    `json:"command"`
	Start   time.Time `json:"start"`
	// End is when it was last seen alive, Gone when first seen gone (both
	// zero: alive at the last sample): it ended between the two.
	End  time.Time `json:"end,omitempty"`
	Gone time.Time `json:"gone,omitempty"`
	CPUS float64   `json:"cpu_s"`
	// PeakRSS is its peak resident memory in bytes (VmHWM).
	PeakRSS int64 `json:"peak_rss"`
	// GPUMiB is the most GPU memory the driver reported for it (0: it
	// never held any, or the driver does not report processes).
	GPUMiB    float64 `json:"gpu_mib,omitempty"`
	OOMKilled bool    `json:"oom_killed,omitempty"`
}

// GPUSample is one leased device at one moment.
type GPUSample struct {
	At     time.Time `json:"at"`
	Index  int       `json:"index"`
	Util   float64   `json:"util"`    // percent
	MemMiB float64   `json:"mem_mib"` // used
	// PowerW is nil where the device does not report it.
	PowerW *float64 `json:"power_w,omitempty"`
}

// CheckpointAdds is what a checkpoint holds that the previous one did
// not: model directories new or changed, code files changed, log bytes
// grown.
type CheckpointAdds struct {
	Seq    int       `json:"seq"`
	At     time.Time `json:"at"`
	AgentS float64   `json:"agent_s"`
	// Models are the directories (workspace paths) holding a config.json
	// and weights that are new or changed.
	Models      []string `json:"models,omitempty"`
	CodeChanged int      `json:"code_changed,omitempty"`
	LogsGrew    int64    `json:"logs_grew,omitempty"`
}

// Limits on what one attempt's observation keeps.
const (
	MaxProcs   = 20000
	MaxCommand = 512
	// MaxCalls bounds an attempt's call spans (about 8 MB stored).
	MaxCalls = 100000
	// maxBytes bounds an observation read back (a 24 h attempt at the
	// defaults stores well under 10 MB).
	maxBytes = 64 << 20
)

// Key is where an attempt's observation is kept: beside its transcript.
func Key(runID string, attempt int) string {
	return keys.Observation(runID, attempt)
}

// Put stores an observation (again: each store replaces the last).
func Put(ctx context.Context, store blob.Store, o *Observation) error {
	b, err := json.Marshal(o)
	if err != nil {
		return fmt.Errorf("encode observation: %w", err)
	}
	if err := store.Put(ctx, Key(o.RunID, o.Attempt), bytes.NewReader(b)); err != nil {
		return fmt.Errorf("store observation of %s attempt %d: %w", o.RunID, o.Attempt, err)
	}
	return nil
}

// Load reads every stored observation of a run, in attempt order.
func Load(ctx context.Context, store blob.Store, runID string) ([]*Observation, error) {
	prefix := keys.Observations(runID)
	objs, err := store.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("list observations of %s: %w", runID, err)
	}
	var out []*Observation
	for _, o := range objs {
		name := strings.TrimPrefix(o.Key, prefix)
		n, ok := strings.CutPrefix(name, "attempt-")
		if !ok || !strings.HasSuffix(n, ".json") {
			continue
		}
		if _, err := strconv.Atoi(strings.TrimSuffix(n, ".json")); err != nil {
			continue
		}
		obs, err := get(ctx, store, o.Key)
		if err != nil {
			return nil, err
		}
		out = append(out, obs)
	}
	return out, nil
}

func get(ctx context.Context, store blob.Store, key string) (*Observation, error) {
	var o Observation
	if err := blob.ReadJSON(ctx, store, key, maxBytes, &o); err != nil {
		return nil, fmt.Errorf("observation: %w", err)
	}
	return &o, nil
}
