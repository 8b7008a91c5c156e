// Human configures people's runs (human baselines).

package config

import "time"

// Human configures people's runs (human baselines): where each worker's
// attach server listens and how a person's pauses and absences go.
type Human struct {
	// Listen is the attach server's address ("": none on this worker);
	// Advertise the address people reach it at ("": Listen's, as bound).
	Listen    string `mapstructure:"listen" yaml:"listen"`
	Advertise string `mapstructure:"advertise" yaml:"advertise"`
	// ReleaseAfter is how long a pause holds the GPU before the attempt is
	// checkpointed and its lease given back.
	ReleaseAfter time.Duration `mapstructure:"release_after" yaml:"release_after"`
	// WaitLimit is how long a person's run waits for its person (at its
	// start, after a release) before it ends with what they left.
	WaitLimit time.Duration `mapstructure:"wait_limit" yaml:"wait_limit"`
}
