package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/internal/app"
	"github.com/mlrb/mlrb/internal/checkpoint"
	"github.com/mlrb/mlrb/internal/cli"
	"github.com/mlrb/mlrb/internal/logstore"
)

func openEngine(cmd *cobra.Command) (*checkpoint.Engine, error) {
	cfg, err := cli.LoadConfig(cmd)
	if err != nil {
		return nil, err
	}
	return app.OpenEngine(cmd.Context(), cfg)
}

func checkpointCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "checkpoint", Short: "list and restore a run's checkpoints"}
	var asJSON bool
	list := &cobra.Command{
		Use: "list RUN_ID", Short: "list a run's committed checkpoints", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := openEngine(cmd)
			if err != nil {
				return err
			}
			ms, err := e.List(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if len(ms) == 0 {
				return cli.Usagef("run %q has no committed checkpoint in the store", args[0])
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
				}
				var rows []row
				for _, m := range ms {
					rows = append(rows, row{m.Seq, m.CreatedAt.Format("2006-01-02T15:04:05Z07:00"), m.Attempt, m.AgentSeconds, len(m.Files), m.Bytes, m.NewBytes, m.Final})
				}
				return printJSON(rows)
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SEQ\tTIME\tATTEMPT\tAGENT S\tFILES\tBYTES\tNEW BYTES\tFINAL\tUNSETTLED")
			for _, m := range ms {
				fmt.Fprintf(tw, "%d\t%s\t%d\t%.1f\t%d\t%d\t%d\t%v\t%s\n", m.Seq, m.CreatedAt.Local().Format("2006-01-02 15:04:05"), m.Attempt, m.AgentSeconds, len(m.Files), m.Bytes, m.NewBytes, m.Final,
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
			e, err := openEngine(cmd)
			if err != nil {
				return err
			}
			var m *checkpoint.Manifest
			if seq == 0 {
				m, err = e.Latest(cmd.Context(), args[0])
				if errors.Is(err, checkpoint.ErrNoCheckpoint) {
					return cli.Usagef("run %q has no committed checkpoint in the store", args[0])
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
			store, err := app.OpenStore(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if attempt == 0 {
				atts, err := logstore.Attempts(ctx, store, args[0])
				if err != nil {
					return err
				}
				if len(atts) == 0 && !follow {
					return cli.Usagef("run %q has no stored logs", args[0])
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
			for {
				if off, err = logstore.Copy(ctx, store, args[0], attempt, off, os.Stdout); err != nil {
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
					_, err := logstore.Copy(ctx, store, args[0], attempt, off, os.Stdout)
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
