// Secret names runs may ask for, and the worker's own they may not.

package contract

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

var secretName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// reservedPrefixes name the worker's own credentials and settings: mlrb's
// (MLRB_STORAGE_S3_SECRET_ACCESS_KEY, MLRB_TEMPORAL_API_KEY), the AWS
// SDK's and the Temporal CLI's. A run may never ask for them, wherever
// they are defined: an agent holding them could write any score.
var reservedPrefixes = []string{"MLRB_", "AWS_", "TEMPORAL_"}

// GatewayNames are the variables the run gateway sets for every agent
// (gateway.AgentEnv): never a secret's.
var GatewayNames = []string{"OPENAI", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"}

// CheckSecretName tells whether name may be passed to an agent as a
// secret: an environment variable name that is none of the worker's own.
// The error never repeats a name that is not a name (it may be a value).
func CheckSecretName(name string) error {
	if !secretName.MatchString(name) {
		return fmt.Errorf("is not an environment variable name: pass the name of a variable in the worker's agent.env_file, never its value")
	}
	upper := strings.ToUpper(name)
	if slices.Contains(GatewayNames, upper) {
		return fmt.Errorf("names %s, refused: the gateway gives every agent a per-attempt token and the gateway's address under that name; the provider's key stays on the worker (gateway.openai_key, gateway.anthropic_key)", name)
	}
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(upper, p) {
			return fmt.Errorf("names %s, refused: names starting %s are the worker's own credentials and settings, never an agent's; put the agent's key in agent.env_file under another name", name, p)
		}
	}
	return nil
}
