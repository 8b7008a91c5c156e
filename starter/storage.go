package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/app"
	"github.com/mlrb/mlrb/internal/blob"
	"github.com/mlrb/mlrb/internal/checkpoint"
	"github.com/mlrb/mlrb/internal/cli"
	"github.com/mlrb/mlrb/internal/logstore"
)

// runEngine opens the checkpoint engine over the store that holds runID's
// checkpoints (see runStore).
func runEngine(cmd *cobra.Command, runID string) (*checkpoint.Engine, error) {
	cfg, err := cli.LoadConfig(cmd)
	if err != nil {
		return nil, err
	}
	store, err := runStore(cmd.Context(), cfg, runID, func(s blob.Store) (bool, error) {
		_, err := checkpoint.New(s, checkpoint.Options{ChunkSize: cfg.Checkpoint.ChunkSize}).Latest(cmd.Context(), runID)
		if errors.Is(err, checkpoint.ErrNoCheckpoint) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return nil, err
	}
	e := checkpoint.New(store, checkpoint.Options{ChunkSize: cfg.Checkpoint.ChunkSize, Parallel: cfg.Storage.Parallel})
	return e, nil
}

// runStore opens the blob store that holds runID's checkpoints and logs:
// the configured one when it has them (has), else the store the run
// itself names (its status, from the workers that ran it). A worker
// started with another --state-dir writes elsewhere; that store is read
// when it is a directory here, and named, with how to point the starter
// at it, when it is not.
func runStore(ctx context.Context, cfg *config.Config, runID string, has func(blob.Store) (bool, error)) (blob.Store, error) {
	store, err := app.OpenStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if ok, err := has(store); ok || err != nil {
		return store, err
	}
	where := storeOfRun(ctx, cfg, runID)
	if where == "" || where == store.String() {
		return store, nil
	}
	if dir, ok := strings.CutPrefix(where, blob.FSPrefix); ok {
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			fmt.Fprintf(os.Stderr, "run %s keeps its checkpoints in %s (this starter's store is %s): reading that\n", runID, where, store)
			return blob.NewFS(dir)
		}
	}
	return nil, cli.Usagef("run %s keeps its checkpoints in %s, but this starter reads %s: point storage.* (or --state-dir) at the run's store", runID, where, store)
}

// storeOfRun asks the run where its workers keep its checkpoints; ""
// when the server, the run or an answer is not to be had.
func storeOfRun(ctx context.Context, cfg *config.Config, runID string) string {
	qctx, cancel := context.WithTimeout(ctx, cfg.Temporal.ConnectTimeout)
	defer cancel()
	c, err := app.Dial(qctx, cfg, zap.NewNop())
	if err != nil {
		return ""
	}
	defer c.Close()
	st, err := queryStatus(qctx, c, runID)
	if err != nil {
		return ""
	}
	return st.Store
}

// noCheckpoints says a run has no checkpoint in store, naming the store.
func noCheckpoints(runID string, e *checkpoint.Engine) error {
	return cli.Usagef("run %q has no committed checkpoint in the store %s (a worker with another --state-dir or storage.* writes elsewhere: point the starter at the same one)", runID, e.Store)
}

func checkpointCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "checkpoint", Short: "list and restore a run's checkpoints"}
	var asJSON bool
	list := &cobra.Command{
		Use: "list RUN_ID", Short: "list a run's committed checkpoints", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := runEngine(cmd, args[0])
			if err != nil {
				return err
			}
			ms, err := e.List(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if len(ms) == 0 {
				return noCheckpoints(args[0], e)
			}
			if asJSON {
				type row struct {
					Seq          int     `json:"seq"`
					At           string  `json:"at"`
					Attempt      int     `json:"attempt"`
					AgentSeconds float64 `json:"agent_seconds"`
					Files        int     `json:"files"`
					Bytes        int64   `json:"bytes"`
					NewBytes     int64   `json:"new_bytes"`
					Final        bool    `json:"final"`
					SupersededBy int     `json:"superseded_by,omitempty"`
				}
				var rows []row
				for _, m := range ms {
					rows = append(rows, row{m.Seq, m.CreatedAt.Format("2006-01-02T15:04:05Z07:00"), m.Attempt, m.AgentSeconds, len(m.Files), m.Bytes, m.NewBytes, m.Final, m.SupersededBy})
				}
				return printJSON(rows)
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SEQ\tTIME\tATTEMPT\tAGENT S\tFILES\tBYTES\tNEW BYTES\tFINAL\tUNSETTLED")
			for _, m := range ms {
				attempt := strconv.Itoa(m.Attempt)
				if m.SupersededBy != 0 {
					attempt += fmt.Sprintf(" (zombie: superseded by %d)", m.SupersededBy)
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%.1f\t%d\t%d\t%d\t%v\t%s\n", m.Seq, m.CreatedAt.Local().Format("2006-01-02 15:04:05"), attempt, m.AgentSeconds, len(m.Files), m.Bytes, m.NewBytes, m.Final,
					strings.Join(m.Unsettled, ","))
			}
			return tw.Flush()
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	var seq int
	restore := &cobra.Command{
		Use: "restore RUN_ID DIR", Short: "pull a run's workspace from a checkpoint (default: the latest) into DIR", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := runEngine(cmd, args[0])
			if err != nil {
				return err
			}
			var m *checkpoint.Manifest
			if seq == 0 {
				m, err = e.Latest(cmd.Context(), args[0])
				if errors.Is(err, checkpoint.ErrNoCheckpoint) {
					return noCheckpoints(args[0], e)
				}
			} else if m, err = e.Load(cmd.Context(), args[0], seq); err != nil {
				return cli.Usagef("--seq: %v", err)
			}
			if err != nil {
				return err
			}
			if entries, err := os.ReadDir(args[1]); err == nil && len(entries) > 0 {
				return cli.Usagef("%s is not empty; restore into a new or empty directory", args[1])
			}
			if err := e.Restore(cmd.Context(), m, args[1]); err != nil {
				return err
			}
			fmt.Printf("restored %s #%d (%d files, %d bytes, every chunk verified) into %s\n", args[0], m.Seq, len(m.Files), m.Bytes, args[1])
			return nil
		},
	}
	restore.Flags().IntVar(&seq, "seq", 0, "checkpoint sequence number (default: the latest)")
	cmd.AddCommand(list, restore)
	return cmd
}

func logsCmd() *cobra.Command {
	var attempt int
	var follow bool
	cmd := &cobra.Command{
		Use: "logs RUN_ID", Short: "print an agent attempt's log from the blob store (--follow until the run ends)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := cli.LoadConfig(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			store, err := runStore(ctx, cfg, args[0], func(s blob.Store) (bool, error) {
				atts, err := logstore.Attempts(ctx, s, args[0])
				return len(atts) > 0, err
			})
			if err != nil {
				return err
			}
			if attempt == 0 {
				atts, err := logstore.Attempts(ctx, store, args[0])
				if err != nil {
					return err
				}
				if len(atts) == 0 && !follow {
					return cli.Usagef("run %q has no stored logs in %s", args[0], store)
				}
				attempt = 1
				if len(atts) > 0 {
					attempt = atts[len(atts)-1]
				}
			}
			var c client.Client
			if follow {
				if c, err = app.Dial(ctx, cfg, zap.NewNop()); err != nil {
					return err
				}
				defer c.Close()
			}
			var off int64
			out := cli.ForTerminal(os.Stdout)
			for {
				if off, err = logstore.Copy(ctx, store, args[0], attempt, off, out); err != nil {
					return err
				}
				if !follow {
					return nil
				}
				busy, _, err := running(ctx, c, args[0])
				if err != nil {
					return err
				}
				if !busy {
					_, err := logstore.Copy(ctx, store, args[0], attempt, off, out)
					return err
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(2 * time.Second):
				}
			}
		},
	}
	cmd.Flags().IntVar(&attempt, "attempt", 0, "attempt (default: the latest with logs)")
	cmd.Flags().BoolVar(&follow, "follow", false, "keep printing until the run ends")
	return cmd
}

func storageCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "storage", Short: "maintain the blob store"}
	var dry bool
	gc := &cobra.Command{
		Use: "gc", Short: "delete chunks no committed checkpoint references (waits for checkpoints in flight)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := cli.LoadConfig(cmd)
			if err != nil {
				return err
			}
			e, err := app.OpenEngine(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			rep, err := e.GC(cmd.Context(), checkpoint.GCOptions{Grace: cfg.Checkpoint.GCGrace, DryRun: dry})
			if err != nil {
				return err
			}
			verb := "deleted"
			if dry {
				verb = "would delete"
			}
			fmt.Printf("%d manifests reference %d of %d chunks; %s %d unreferenced chunks (%d bytes); %d spared as younger than %s\n",
				rep.Manifests, rep.Referenced, rep.Chunks, verb, rep.Deleted, rep.DeletedBytes, rep.TooYoung, cfg.Checkpoint.GCGrace)
			return nil
		},
	}
	gc.Flags().BoolVar(&dry, "dry-run", false, "only report")
	cmd.AddCommand(gc)
	return cmd
}
