package runs

import (
	"sort"
	"strconv"
	"strings"

	"github.com/mlrb/mlrb/internal/gpucost"
	"github.com/mlrb/mlrb/internal/observe"
)

// HardwareClass names the hardware a run had: "CPU", "1× A100-40GB".
func HardwareClass(gpus int, gpuType string) string {
	switch {
	case gpus == 0:
		return "CPU"
	case gpuType == "":
		return strconv.Itoa(gpus) + "× GPU"
	}
	return strconv.Itoa(gpus) + "× " + gpuType
}

// ParseHardware is HardwareClass read back: the GPU count and type.
func ParseHardware(h string) (int, string) {
	n, typ, ok := strings.Cut(h, "× ")
	if !ok {
		return 0, ""
	}
	gpus, err := strconv.Atoi(n)
	if err != nil {
		return 0, ""
	}
	if typ == "GPU" {
		typ = ""
	}
	return gpus, typ
}

// PriceGPUs sets the result's GPU dollars (its billed GPU-hours at the
// table's rate for its GPU type; a CPU run's are 0) and each mark's
// cumulative cost: the GPUs for the agent time by then, and the LLM
// calls the observations saw end by then. A GPU type the table does not
// price leaves them unset.
func PriceGPUs(r *Result, t *gpucost.Table, obs []*observe.Observation) {
	gpus, typ := ParseHardware(r.Hardware)
	rate := 0.0
	if gpus > 0 {
		ref, ok := t.Rate(typ)
		if !ok {
			return
		}
		rate, r.Cost.GPUPrices = ref.USDPerGPUHour, &ref
	}
	usd := r.Cost.BilledGPUHours * rate
	r.Cost.GPUUSD = &usd
	type call struct{ at, usd float64 }
	var calls []call
	for _, o := range obs {
		for _, c := range o.Calls {
			calls = append(calls, call{o.AgentAt(c.End), c.USD})
		}
	}
	sort.Slice(calls, func(i, j int) bool { return calls[i].at < calls[j].at })
	for i := range r.Curve {
		m := &r.Curve[i]
		spent := rate * float64(gpus) * m.AtS / 3600
		for _, c := range calls {
			if c.at > m.AtS {
				break
			}
			spent += c.usd
		}
		m.CostUSD = &spent
	}
}
