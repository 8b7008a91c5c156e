package lmeval

import (
	"testing"

	"github.com/mlrb/mlrb/tasks"
)

// FuzzRead: any results file is read and scored, or refused; never a
// panic.
func FuzzRead(f *testing.F) {
	f.Add([]byte(`{"results":{"sglue_rte":{"acc,none":0.5,"acc_stderr,none":0.01}},"groups":{}}`))
	f.Add([]byte(`{"results":{"mmlu":{"acc,none":"x"}}}`))
	metric := tasks.Metric{Name: "m", Aggregate: "mean", Parts: []tasks.MetricPart{{Task: "sglue_rte", Field: "acc,none"}, {Task: "mmlu", Field: "acc,none"}}}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Parse(b, "results.json")
		if err != nil {
			return
		}
		_, _, _ = Score(r, metric)
	})
}
