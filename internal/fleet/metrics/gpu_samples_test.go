package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mlrb/mlrb/internal/sandbox/observe"
)

// TestGPUSamples: the leased GPUs' last samples are exported by device;
// a device whose samples stopped (its lease ended) drops out.
func TestGPUSamples(t *testing.T) {
	l := observe.NewLatest(time.Minute)
	w := 250.5
	l.Set([]observe.GPUSample{{At: time.Now(), Index: 1, Util: 87, MemMiB: 30000, PowerW: &w}, {At: time.Now().Add(-2 * time.Minute), Index: 2, Util: 5}})
	want := `
# HELP mlrb_gpu_utilization_percent Utilisation of this host's leased GPUs as the attempt holding each last sampled it (observe.gpu_interval), by device index.
# TYPE mlrb_gpu_utilization_percent gauge
mlrb_gpu_utilization_percent{device="1"} 87
# HELP mlrb_gpu_power_watts Power drawn by this host's leased GPUs, as last sampled, by device index (where the GPU reports it).
# TYPE mlrb_gpu_power_watts gauge
mlrb_gpu_power_watts{device="1"} 250.5
`
	if err := testutil.CollectAndCompare(GPUSamples(l.Fresh), strings.NewReader(want), "mlrb_gpu_utilization_percent", "mlrb_gpu_power_watts"); err != nil {
		t.Fatal(err)
	}
}
