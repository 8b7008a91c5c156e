// Made-up observations for tests and bench/report (a synthetic 24 h attempt).

// Package observetest holds observations made up for tests and
// benchmarks, as net/http/httptest does for HTTP: nothing in a worker or
// the starter imports it.
package observetest

import (
	"fmt"
	"time"

	"github.com/mlrb/mlrb/internal/sandbox/observe"
)

// Day is a synthetic 24 h observed attempt, for the research timeline's
// tests and bench/report: a shell the agent keeps
// runs 200 experiments (some overlapping), 8 GPUs sampled every 30 s,
// 3,000 LLM calls, a checkpoint every 10 minutes, a model every tenth.
func Day() *observe.Observation {
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	o := &observe.Observation{RunID: "b/a/t/s1", Attempt: 1, Start: t0, End: at(86400), Ended: "deadline", StopAt: at(86340), Devices: []int{0, 1, 2, 3, 4, 5, 6, 7},
		Procs: []observe.Proc{{PID: 1, Root: true, Command: "agent", Start: t0}, {PID: 2, PPID: 1, Command: "bash", Start: at(1)}}}
	for i := range 200 {
		start := float64(i) * 430
		p := observe.Proc{PID: 100 + i, PPID: 2, Command: fmt.Sprintf("python train.py --trial %d", i), Start: at(start), End: at(start + 300 + float64(i%7)*60), GPUMiB: 20000}
		if i%13 == 0 {
			p.OOMKilled = true
		}
		if i == 199 {
			p.End = time.Time{}
		}
		o.Procs = append(o.Procs, p)
	}
	for s := 0.0; s < 86400; s += 30 {
		for d := range 8 {
			o.GPU = append(o.GPU, observe.GPUSample{At: at(s), Index: d, Util: float64(int(s/30) % 100), MemMiB: 20000})
		}
	}
	for i := range 3000 {
		o.Calls = append(o.Calls, observe.Span{Start: at(float64(i) * 28.8), End: at(float64(i)*28.8 + 5), USD: 0.01})
	}
	for i := 1; i <= 144; i++ {
		c := observe.CheckpointAdds{Seq: i, At: at(float64(i) * 600), AgentS: float64(i) * 600}
		if i%10 == 0 {
			c.Models = []string{"output/model"}
		}
		o.Checkpoints = append(o.Checkpoints, c)
	}
	return o
}
