// The enumerated kinds of config values (storage.kind, host.runtime, provision.kind).

package config

import (
	"fmt"
	"slices"
	"strings"
)

// The kinds a few keys choose among, typed so that code compares them
// with these constants, never with literals; each list feeds Validate.

// StorageKind is storage.kind.
type StorageKind string

// Stores.
const (
	StorageFS StorageKind = "fs"
	StorageS3 StorageKind = "s3"
)

// StorageKinds lists the storage kinds.
var StorageKinds = []StorageKind{StorageFS, StorageS3}

// Runtime is host.runtime.
type Runtime string

// Runtimes.
const (
	RuntimeProcess Runtime = "process"
	RuntimeDocker  Runtime = "docker"
)

// Runtimes lists the runtimes.
var Runtimes = []Runtime{RuntimeProcess, RuntimeDocker}

// ProvisionKind is provision.kind.
type ProvisionKind string

// Provisioners.
const (
	ProvisionStatic ProvisionKind = "static"
	ProvisionSlurm  ProvisionKind = "slurm"
	ProvisionEC2    ProvisionKind = "ec2"
)

// ProvisionKinds lists the provisioners.
var ProvisionKinds = []ProvisionKind{ProvisionStatic, ProvisionSlurm, ProvisionEC2}

// Preemption is host.preemption.
type Preemption string

// What may warn of a host being taken back.
const (
	PreemptionNone    Preemption = "none"
	PreemptionEC2Spot Preemption = "ec2-spot"
)

// Preemptions lists the preemption watchers.
var Preemptions = []Preemption{PreemptionNone, PreemptionEC2Spot}

// Compression is temporal.compression.
type Compression string

// How requests to the Temporal frontend are compressed.
const (
	// CompressionAuto: none to a loopback address (the embedded server,
	// or a frontend on the same host), gzip over a network.
	CompressionAuto Compression = "auto"
	CompressionGzip Compression = "gzip"
	CompressionNone Compression = "none"
)

// Compressions lists the compressions.
var Compressions = []Compression{CompressionAuto, CompressionGzip, CompressionNone}

// oneOf says what is wrong with v when it is none of kinds.
func oneOf[K ~string](key string, v K, kinds []K) error {
	if slices.Contains(kinds, v) {
		return nil
	}
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = string(k)
	}
	return fmt.Errorf("%s: %q is not supported (use %s)", key, v, strings.Join(names, ", "))
}
