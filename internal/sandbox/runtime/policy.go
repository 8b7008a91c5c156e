// Policy is the sandbox a task ran in, as kept with its run (and signed in its bundle).

package runtime

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
)

// Policy is the sandbox a task ran in, as kept with its run (and signed
// in its bundle): what it could reach, use and do.
type Policy struct {
	// Runtime is "docker" or "process" (a process has none of a
	// container's isolation: the built-in agents on the mini suite).
	Runtime string `json:"runtime"`
	Image   string `json:"image,omitempty"`
	User    string `json:"user,omitempty"`
	// Network is the container's own ("none", or "door": its one way
	// out is the worker's gateway).
	Network     string   `json:"network"`
	MemoryBytes int64    `json:"memory_bytes,omitempty"`
	CPUs        float64  `json:"cpus,omitempty"`
	PidsLimit   int64    `json:"pids_limit,omitempty"`
	Devices     []int    `json:"gpu_devices,omitempty"`
	LogLimit    int64    `json:"log_limit_bytes,omitempty"`
	Mounts      []string `json:"mounts,omitempty"`
	// Capabilities are those kept of root's; SecurityOpt the container's
	// security options, its seccomp profile by SHA-256.
	Capabilities []string `json:"capabilities,omitempty"`
	SecurityOpt  []string `json:"security_opt,omitempty"`
	MaskedPaths  []string `json:"masked_paths,omitempty"`
}

// Policy is the sandbox Start gives spec.
func (d *Docker) Policy(spec TaskSpec) Policy {
	p := basePolicy("docker", spec)
	sum := sha256.Sum256([]byte(seccompProfile()))
	p.Capabilities = slices.Clone(Capabilities)
	p.SecurityOpt = []string{"no-new-privileges", "seccomp=sha256:" + hex.EncodeToString(sum[:])}
	p.MaskedPaths = slices.Clone(maskedPaths)
	return p
}

// Policy is the sandbox Start gives spec: a process of the worker's own
// user on the host's network, none of a container's limits but its
// output's cap.
func (p *Process) Policy(spec TaskSpec) Policy {
	return Policy{Runtime: "process", Network: "host", Devices: spec.Devices, LogLimit: spec.LogLimit}
}

func basePolicy(rt string, spec TaskSpec) Policy {
	p := Policy{Runtime: rt, Image: spec.Image, User: spec.User, Network: spec.Network, MemoryBytes: spec.MemoryBytes, CPUs: spec.CPUs,
		PidsLimit: spec.PidsLimit, Devices: spec.Devices, LogLimit: spec.LogLimit, Mounts: spec.Binds}
	if spec.Door != nil {
		p.Network = "door"
	}
	return p
}
