// What every command's run function is given, as restic's GlobalOptions.

package main

import (
	"context"
	"encoding/json"
	"io"
	"os"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/agents"
	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/process/app"
	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/tasks"
)

// globals is what every command's run function is given, as restic's
// GlobalOptions: the config the persistent flags select (read once), a
// Temporal client dialled on first use, and where to write.
type globals struct {
	ctx context.Context
	cmd *cobra.Command
	// out and errOut are what every command prints to: on a terminal,
	// control characters are shown escaped (runs print what agents
	// wrote: file names, command lines, log lines). raw is the output as
	// it is, for a recording's replay and a screen's redraw alone.
	out    io.Writer
	errOut io.Writer
	raw    io.Writer
	cfg    *config.Config
	c      client.Client
	blobs  blob.Store
	// agentDefs is the agent catalogue, loaded once.
	agentDefs *agents.Catalog
}

// run makes a command's RunE: fn runs with the command's globals, and
// the client it dialled, if any, is closed after it.
func run(fn func(g *globals, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		g := &globals{ctx: cmd.Context(), cmd: cmd, out: cli.ForTerminal(cmd.OutOrStdout()), errOut: cli.ForTerminal(cmd.ErrOrStderr()), raw: cmd.OutOrStdout()}
		defer g.close()
		return fn(g, args)
	}
}

// config loads the effective config (defaults < file < env < flags).
func (g *globals) config() (*config.Config, error) {
	if g.cfg != nil {
		return g.cfg, nil
	}
	cfg, err := cli.LoadConfig(g.cmd)
	if err != nil {
		return nil, err
	}
	g.cfg = cfg
	return cfg, nil
}

// catalog loads the config and the task catalog it points at; a bad
// catalog is the user's input.
func (g *globals) catalog() (*config.Config, *tasks.Catalog, error) {
	cfg, err := g.config()
	if err != nil {
		return nil, nil, err
	}
	cat, err := tasks.Load(cfg.Tasks.Dir)
	if err != nil {
		return nil, nil, &cli.UsageError{Err: err}
	}
	return cfg, cat, nil
}

// store opens the configured blob store once.
func (g *globals) store() (blob.Store, error) {
	if g.blobs != nil {
		return g.blobs, nil
	}
	cfg, err := g.config()
	if err != nil {
		return nil, err
	}
	s, err := app.OpenStore(g.ctx, cfg)
	if err != nil {
		return nil, err
	}
	g.blobs = s
	return s, nil
}

// client dials Temporal once, and refuses a namespace mlrb has not been
// set up in: a run started there would hang on its first workflow task.
func (g *globals) client() (client.Client, error) {
	if g.c != nil {
		return g.c, nil
	}
	c, err := g.dial()
	if err != nil {
		return nil, err
	}
	if err := app.CheckNamespace(g.ctx, c, g.cfg.Temporal.Namespace); err != nil {
		return nil, err
	}
	return c, nil
}

// dial connects to Temporal once, without checking the namespace.
func (g *globals) dial() (client.Client, error) {
	if g.c != nil {
		return g.c, nil
	}
	cfg, err := g.config()
	if err != nil {
		return nil, err
	}
	c, err := app.Dial(g.ctx, cfg, zap.NewNop())
	if err != nil {
		return nil, err
	}
	g.c = c
	return c, nil
}

func (g *globals) close() {
	if g.c != nil {
		g.c.Close()
	}
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// whoAmI names the person at this starter, as user@host: who gives a
// verdict or publishes an export, when they do not say.
func whoAmI() string {
	host, _ := os.Hostname()
	return os.Getenv("USER") + "@" + host
}
