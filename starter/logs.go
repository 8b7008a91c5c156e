// `starter logs`: its flags and what it does.

package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/keys"
	"github.com/mlrb/mlrb/internal/store/logstore"
)

// logsOptions are `starter logs`'s flags.
type logsOptions struct {
	attempt   int
	follow    bool
	evaluator bool
}

func (o *logsOptions) AddFlags(f *pflag.FlagSet) {
	f.IntVar(&o.attempt, "attempt", 0, "attempt (default: the latest with logs)")
	f.BoolVar(&o.follow, "follow", false, "keep printing until the run ends")
	f.BoolVar(&o.evaluator, "evaluator", false, "print the kept logs of the run's evaluations instead (the end of each, latest last)")
}

func logsCmd() *cobra.Command {
	var o logsOptions
	cmd := &cobra.Command{
		Use: "logs RUN_ID", Short: "print an agent attempt's log from the blob store (--follow until the run ends)", Args: cobra.ExactArgs(1),
		RunE: run(func(g *globals, args []string) error { return runLogs(g, o, args[0]) }),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// runLogs copies an attempt's stored log; with --follow, until the run
// ends.
func runLogs(g *globals, o logsOptions, id string) error {
	if o.evaluator {
		return evaluatorLogs(g, id)
	}
	store, err := runStore(g, id, func(s blob.Store) (bool, error) {
		atts, err := logstore.Attempts(g.ctx, s, id)
		return len(atts) > 0, err
	})
	if err != nil {
		return err
	}
	attempt := o.attempt
	if attempt == 0 {
		if attempt, err = latestLogged(g, store, id, o.follow); err != nil {
			return err
		}
	}
	var c client.Client
	if o.follow {
		if c, err = g.client(); err != nil {
			return err
		}
	}
	var off int64
	out := g.out
	for {
		if off, err = logstore.Copy(g.ctx, store, id, attempt, off, out); err != nil || !o.follow {
			return err
		}
		busy, _, err := running(g.ctx, c, id)
		if err != nil {
			return err
		}
		if !busy {
			_, err := logstore.Copy(g.ctx, store, id, attempt, off, out)
			return err
		}
		select {
		case <-g.ctx.Done():
			return nil
		case <-time.After(2 * time.Second):
		}
	}
}

// latestLogged is the latest attempt with stored logs (1 when following a
// run that has none yet).
func latestLogged(g *globals, store blob.Store, id string, follow bool) (int, error) {
	atts, err := logstore.Attempts(g.ctx, store, id)
	if err != nil {
		return 0, err
	}
	if len(atts) == 0 && !follow {
		return 0, cli.Usagef("run %q has no stored logs in %s", id, store)
	}
	if len(atts) == 0 {
		return 1, nil
	}
	return atts[len(atts)-1], nil
}

// evaluatorLogs prints the kept logs of a run's evaluations, each under
// its evaluation's name (final-N-try-M, mark-S-try-M).
func evaluatorLogs(g *globals, id string) error {
	prefix := keys.Evaluations(id)
	var objs []blob.Object
	store, err := runStore(g, id, func(s blob.Store) (bool, error) {
		var err error
		objs, err = s.List(g.ctx, prefix)
		return len(objs) > 0, err
	})
	if err != nil {
		return err
	}
	if objs, err = store.List(g.ctx, prefix); err != nil {
		return fmt.Errorf("evaluations of %s: %w", id, err)
	}
	out, n := g.out, 0
	for _, o := range objs {
		if !strings.HasSuffix(o.Key, "/"+activities.EvaluatorLogName) {
			continue
		}
		n++
		fmt.Fprintf(g.out, "=== %s ===\n", strings.TrimSuffix(strings.TrimPrefix(o.Key, prefix), "/"+activities.EvaluatorLogName))
		rc, err := store.Get(g.ctx, o.Key)
		if err != nil {
			return fmt.Errorf("evaluator log of %s: %w", id, err)
		}
		_, err = io.Copy(out, rc)
		_ = rc.Close()
		if err != nil {
			return fmt.Errorf("evaluator log of %s: %w", id, err)
		}
	}
	if n == 0 {
		return cli.Usagef("run %s has no kept evaluator log (none evaluated yet, or evaluated before logs were kept)", id)
	}
	return nil
}
