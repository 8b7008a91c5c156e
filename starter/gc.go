// `starter storage gc`: its flags and what it does.

package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mlrb/mlrb/internal/process/app"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
)

func storageCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "storage", Short: "maintain the blob store"}
	cmd.AddCommand(gcCmd())
	return cmd
}

// gcOptions are `starter storage gc`'s flags.
type gcOptions struct{ dry bool }

func (o *gcOptions) AddFlags(f *pflag.FlagSet) { f.BoolVar(&o.dry, "dry-run", false, "only report") }

func gcCmd() *cobra.Command {
	var o gcOptions
	cmd := &cobra.Command{
		Use: "gc", Short: "delete chunks no committed checkpoint references (waits for checkpoints in flight)", Args: cobra.NoArgs,
		RunE: run(func(g *globals, _ []string) error { return runGC(g, o) }),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// runGC deletes the chunks no committed checkpoint references.
func runGC(g *globals, o gcOptions) error {
	cfg, err := g.config()
	if err != nil {
		return err
	}
	e, err := app.OpenEngine(g.ctx, cfg)
	if err != nil {
		return err
	}
	rep, err := e.GC(g.ctx, checkpoint.GCOptions{Grace: cfg.Checkpoint.GCGrace, DryRun: o.dry})
	if err != nil {
		return err
	}
	verb := "deleted"
	if o.dry {
		verb = "would delete"
	}
	fmt.Fprintf(g.out, "%d manifests reference %d of %d chunks; %s %d unreferenced chunks (%d bytes); %d spared as younger than %s\n",
		rep.Manifests, rep.Referenced, rep.Chunks, verb, rep.Deleted, rep.DeletedBytes, rep.TooYoung, cfg.Checkpoint.GCGrace)
	return nil
}
