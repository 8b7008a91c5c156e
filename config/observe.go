// Config of bundles' signing and the host-side observer.

package config

import "time"

// Bundle is how run bundles are signed.
type Bundle struct {
	// SigningKey is the operator's ed25519 private key (PEM), written by
	// `starter keys new`.
	SigningKey string `mapstructure:"signing_key" yaml:"signing_key"`
}

// Cost configures what GPU time costs.
type Cost struct {
	// GPUPrices is the GPU price table file ("": the built-in one).
	GPUPrices string `mapstructure:"gpu_prices" yaml:"gpu_prices"`
}

// Observe configures what a worker sees of an agent's research: its
// processes and the leased GPUs, sampled from the host.
type Observe struct {
	ProcInterval time.Duration `mapstructure:"proc_interval" yaml:"proc_interval"`
	GPUInterval  time.Duration `mapstructure:"gpu_interval" yaml:"gpu_interval"`
	// GPUCommand is nvidia-smi, or what stands in for it, with any
	// leading arguments (empty: GPUs are not sampled).
	GPUCommand []string `mapstructure:"gpu_command" yaml:"gpu_command"`
	// MinExperiment is how long a process runs (if it touches no GPU) to
	// count as an experiment.
	MinExperiment time.Duration `mapstructure:"min_experiment" yaml:"min_experiment"`
}
