// Cobra plumbing: config loaded for a command, exit codes.

// Package cli is the cobra plumbing the worker and the starter share:
// config from flags, one line on error and the exit codes (2 for bad
// input, nothing started; 1 for failures).
package cli

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/process/app"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/tasks"
)

// LoadConfig loads the config for a command, honouring --config and the
// key flags it was given (config.AddFlags).
func LoadConfig(cmd *cobra.Command) (*config.Config, error) {
	file, _ := cmd.Flags().GetString("config")
	keys := map[string]string{}
	for flag, key := range config.FlagKeys() {
		if f := cmd.Flags().Lookup(flag); f != nil && f.Changed {
			keys[flag] = key
		}
	}
	c, err := config.Load(file, cmd.Flags(), keys, nil)
	if err != nil {
		return nil, err
	}
	return c, app.CheckConfig(c)
}

// WorkerKeys are the keys the worker exposes as flags.
var WorkerKeys = []string{"dev.state_dir", "dev.port", "dev.ui_port", "temporal.address", "temporal.namespace", "host.id", "host.max_agents",
	"log.level", "tasks.dir", "metrics.listen"}

// PolicyKeys are the keys of how a run is driven that the commands which
// start runs expose as flags.
var PolicyKeys = []string{"checkpoint.interval", "agent.heartbeat_timeout", "agent.grace", "agent.max_infra_attempts", "eval.attempts"}

// UsageError is bad input found before anything started.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef makes a UsageError.
func Usagef(format string, a ...any) error { return &UsageError{Err: fmt.Errorf(format, a...)} }

// Execute runs a root command: one line on error, exit code 2 for bad
// input (nothing was started), 1 for failures.
func Execute(root *cobra.Command) {
	root.SilenceErrors = true
	root.SilenceUsage = true
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &UsageError{Err: err} })
	err := app.ExplainOutage(root.Execute())
	if err == nil {
		return
	}
	msg := strings.ReplaceAll(err.Error(), "\n", " ")
	// The one line may quote what an agent wrote (a log's tail, a file
	// name): escaped on a terminal, as every command's output is.
	fmt.Fprintf(ForTerminal(os.Stderr), "%s: %s\n", root.Name(), msg)
	var ue *UsageError
	if errors.As(err, &ue) || IsUsage(err) || strings.HasPrefix(msg, "unknown command") || strings.Contains(msg, "accepts ") || strings.Contains(msg, "required flag") {
		os.Exit(2)
	}
	os.Exit(1)
}

// IsUsage tells whether err is the user's input rather than a failure.
func IsUsage(err error) bool {
	var ce *config.Error
	var ut *tasks.UnknownTaskError
	var conn *app.ConnectError
	var se *blob.StoreError
	var cat *tasks.CatalogError
	var setup *app.SetupError
	return errors.As(err, &ce) || errors.As(err, &ut) || errors.As(err, &conn) || errors.As(err, &se) || errors.As(err, &cat) || errors.As(err, &setup)
}
