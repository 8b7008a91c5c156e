// `starter setup`: its flags and what it does.

package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mlrb/mlrb/internal/process/app"
	"github.com/mlrb/mlrb/internal/process/cli"
)

// setupOptions are `starter setup`'s flags.
type setupOptions struct {
	create    bool
	retention time.Duration
}

func (o *setupOptions) AddFlags(f *pflag.FlagSet) {
	f.BoolVar(&o.create, "create-namespace", false, "create temporal.namespace when the cluster has none by that name")
	f.DurationVar(&o.retention, "retention", 0, "how long closed runs stay listed: the new namespace's (default 720h), or raised to this on an existing one")
}

func setupCmd() *cobra.Command {
	var o setupOptions
	cmd := &cobra.Command{
		Use:   "setup",
		Short: "make a Temporal cluster's namespace ready for mlrb: create it if asked, register the search attributes, verify",
		Long: `setup prepares temporal.namespace on the cluster at temporal.address, once per cluster:
it creates the namespace (with --create-namespace), registers mlrb's search attributes
through the operator service, and reads both back. Workers refuse to poll, and the starter
to start runs, in a namespace that lacks them. Safe to run again.

The retention must outlast a benchmark's life plus eval.wait_limit: ` + "`benchmark resume`" + ` starts
again any run the namespace no longer lists.`,
		Args: cobra.NoArgs,
		RunE: run(func(g *globals, _ []string) error { return runSetup(g, o) }),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func runSetup(g *globals, o setupOptions) error {
	if o.retention < 0 || (o.retention > 0 && o.retention < 24*time.Hour) {
		return cli.Usagef("--retention: %s is too short; Temporal keeps closed runs at least 24h, and mlrb needs %s or more", o.retention, app.MinRetention)
	}
	c, err := g.dial()
	if err != nil {
		return err
	}
	ns := g.cfg.Temporal.Namespace
	rep, err := app.SetupNamespace(g.ctx, c, ns, app.SetupOptions{Create: o.create, Retention: o.retention})
	if err != nil {
		return err
	}
	verb := "exists"
	if rep.Created {
		verb = "created"
	}
	fmt.Fprintf(g.out, "namespace %s at %s: %s, retention %s\n", ns, g.cfg.Temporal.Address, verb, rep.Retention)
	if len(rep.Added) > 0 {
		fmt.Fprintf(g.out, "search attributes registered: %s\n", strings.Join(rep.Added, ", "))
	} else {
		fmt.Fprintln(g.out, "search attributes: all present")
	}
	if rep.Retention < app.MinRetention {
		fmt.Fprintf(g.errOut, "warning: retention %s is under %s: `benchmark resume` would start again a run closed longer ago than that; raise it with `starter setup --retention 720h`\n",
			rep.Retention, app.MinRetention)
	}
	fmt.Fprintln(g.out, "ready")
	return nil
}
