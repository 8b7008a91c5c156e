// `starter checkpoint list`: its flags and what it does.

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
)

func checkpointCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "checkpoint", Short: "list and restore a run's checkpoints"}
	cmd.AddCommand(checkpointListCmd(), checkpointRestoreCmd())
	return cmd
}

// checkpointListOptions are `starter checkpoint list`'s flags.
type checkpointListOptions struct{ json bool }

func (o *checkpointListOptions) AddFlags(f *pflag.FlagSet) {
	f.BoolVar(&o.json, "json", false, "print JSON")
}

func checkpointListCmd() *cobra.Command {
	var o checkpointListOptions
	cmd := &cobra.Command{
		Use: "list RUN_ID", Short: "list a run's committed checkpoints", Args: cobra.ExactArgs(1),
		RunE: run(func(g *globals, args []string) error { return runCheckpointList(g, o, args[0]) }),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// checkpointRow is one row of `starter checkpoint list --json`.
type checkpointRow struct {
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

// runCheckpointList lists a run's committed checkpoints.
func runCheckpointList(g *globals, o checkpointListOptions, id string) error {
	e, err := runEngine(g, id)
	if err != nil {
		return err
	}
	ms, err := e.List(g.ctx, id)
	if err != nil {
		return err
	}
	if len(ms) == 0 {
		return noCheckpoints(id, e)
	}
	if o.json {
		rows := make([]checkpointRow, 0, len(ms))
		for _, m := range ms {
			rows = append(rows, checkpointRow{m.Seq, m.CreatedAt.Format("2006-01-02T15:04:05Z07:00"), m.Attempt, m.AgentSeconds, len(m.Files), m.Bytes, m.NewBytes, m.Final, m.SupersededBy})
		}
		return printJSON(g.out, rows)
	}
	return writeCheckpoints(g.out, ms)
}

func writeCheckpoints(w io.Writer, ms []*checkpoint.Manifest) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
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
}

// checkpointRestoreOptions are `starter checkpoint restore`'s flags.
type checkpointRestoreOptions struct{ seq int }

func (o *checkpointRestoreOptions) AddFlags(f *pflag.FlagSet) {
	f.IntVar(&o.seq, "seq", 0, "checkpoint sequence number (default: the latest)")
}

func checkpointRestoreCmd() *cobra.Command {
	var o checkpointRestoreOptions
	cmd := &cobra.Command{
		Use: "restore RUN_ID DIR", Short: "pull a run's workspace from a checkpoint (default: the latest) into DIR", Args: cobra.ExactArgs(2),
		RunE: run(func(g *globals, args []string) error { return runCheckpointRestore(g, o, args[0], args[1]) }),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// runCheckpointRestore restores a run's checkpoint into an empty dir,
// every chunk verified.
func runCheckpointRestore(g *globals, o checkpointRestoreOptions, id, dir string) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return cli.Usagef("%s is not empty; restore into a new or empty directory", dir)
	}
	e, err := runEngine(g, id)
	if err != nil {
		return err
	}
	var m *checkpoint.Manifest
	if o.seq == 0 {
		m, err = e.Latest(g.ctx, id)
		if errors.Is(err, checkpoint.ErrNoCheckpoint) {
			return noCheckpoints(id, e)
		}
	} else if m, err = e.Load(g.ctx, id, o.seq); err != nil {
		return cli.Usagef("--seq: %v", err)
	}
	if err != nil {
		return err
	}
	if err := e.Restore(g.ctx, m, dir); err != nil {
		return err
	}
	fmt.Fprintf(g.out, "restored %s #%d (%d files, %d bytes, every chunk verified) into %s\n", id, m.Seq, len(m.Files), m.Bytes, dir)
	return nil
}
