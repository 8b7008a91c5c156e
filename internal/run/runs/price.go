// A run's hardware class.

package runs

import (
	"strconv"
	"strings"
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
