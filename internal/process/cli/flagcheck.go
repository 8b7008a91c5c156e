// KeyFlags checks a command tree's flags against config.Table and returns the key flags it exposes.

package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mlrb/mlrb/config"
)

// KeyFlags checks a command tree's flags against config.Table and returns
// the key flags it exposes: a flag named as a key's flag must be that
// key's (declared by config.AddFlags), never a command's own flag that
// happens to share the name (watch --interval once loaded
// checkpoint.interval).
func KeyFlags(root *cobra.Command) (map[string]bool, error) {
	exposed := map[string]bool{}
	keys := config.FlagKeys()
	var problems []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		check := func(f *pflag.Flag) {
			key, isKey := keys[f.Name]
			if !isKey {
				return
			}
			if declared, ok := config.FlagKey(f); !ok || declared != key {
				problems = append(problems, fmt.Sprintf("%s --%s is the flag of %s but is declared by hand", c.CommandPath(), f.Name, key))
				return
			}
			exposed[f.Name] = true
		}
		c.LocalFlags().VisitAll(check)
		c.PersistentFlags().VisitAll(check)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if len(problems) > 0 {
		return exposed, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return exposed, nil
}
