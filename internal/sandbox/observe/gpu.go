// GPUQuery samples leased devices through nvidia-smi's query interface (`nvidia-smi --help-query-gpu` and `--help-query-compute-apps` list the fields.

package observe

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// GPUQuery samples leased devices through nvidia-smi's query interface
// (`nvidia-smi --help-query-gpu` and `--help-query-compute-apps` list the
// fields; the csv,noheader,nounits format prints one line per device or
// process, fields separated by ", ", numbers without units, and "[N/A]"
// or "[Not Supported]" where a device does not report a field).
type GPUQuery struct {
	// Command is nvidia-smi, or what stands in for it (a wrapper that
	// runs it in a driver container, say), with any leading arguments.
	Command []string
	Timeout time.Duration
}

// Devices samples each device's utilisation, memory used and power draw.
func (q GPUQuery) Devices(ctx context.Context, devices []int, at time.Time) ([]GPUSample, error) {
	out, err := q.run(ctx, "--query-gpu=index,utilization.gpu,memory.used,power.draw", devices)
	if err != nil {
		return nil, err
	}
	var samples []GPUSample
	for _, f := range rows(out) {
		if len(f) < 4 {
			return nil, fmt.Errorf("gpu query: %d fields in %q, want 4", len(f), strings.Join(f, ", "))
		}
		idx, err := strconv.Atoi(f[0])
		if err != nil {
			return nil, fmt.Errorf("gpu query: index %q: %w", f[0], err)
		}
		s := GPUSample{At: at, Index: idx, Util: number(f[1]), MemMiB: number(f[2])}
		if p, ok := reported(f[3]); ok {
			s.PowerW = &p
		}
		samples = append(samples, s)
	}
	return samples, nil
}

// Apps is the GPU memory (MiB) each process holds on the devices, by
// host pid; empty where the driver does not report processes.
func (q GPUQuery) Apps(ctx context.Context, devices []int) (map[int]float64, error) {
	out, err := q.run(ctx, "--query-compute-apps=pid,used_memory", devices)
	if err != nil {
		return nil, err
	}
	apps := map[int]float64{}
	for _, f := range rows(out) {
		if len(f) < 2 {
			continue
		}
		pid, err := strconv.Atoi(f[0])
		if err != nil {
			continue
		}
		apps[pid] += number(f[1])
	}
	return apps, nil
}

func (q GPUQuery) run(ctx context.Context, query string, devices []int) ([]byte, error) {
	if len(q.Command) == 0 {
		return nil, fmt.Errorf("no gpu query command")
	}
	ids := make([]string, len(devices))
	for i, d := range devices {
		ids[i] = strconv.Itoa(d)
	}
	timeout := q.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	args := append(append([]string{}, q.Command[1:]...), query, "--format=csv,noheader,nounits", "-i", strings.Join(ids, ","))
	cmd := exec.CommandContext(ctx, q.Command[0], args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", q.Command[0], query, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

func rows(out []byte) [][]string {
	var rs [][]string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Split(line, ",")
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		rs = append(rs, f)
	}
	return rs
}

// reported parses a number, false for "[N/A]", "[Not Supported]" and
// the like.
func reported(s string) (float64, bool) {
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil
}

func number(s string) float64 {
	v, _ := reported(s)
	return v
}
