// sessionsCmd lists a person's run's attach sessions, and replays one in this terminal as it was seen (asciicast v2, which asciinema plays too).

package main

import (
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/sandbox/attach"
	"github.com/mlrb/mlrb/internal/store/blob"
)

// sessionsCmd lists a person's run's attach sessions, and replays one in
// this terminal as it was seen (asciicast v2, which asciinema plays too).
func sessionsCmd() *cobra.Command {
	var play string
	var speed float64
	var idle time.Duration
	cmd := &cobra.Command{
		Use:   "sessions RUN_ID [--play N]",
		Short: "a person's run's recorded attach sessions: list them, or replay one (--play N) in this terminal",
		Args:  cobra.ExactArgs(1),
		RunE: run(func(g *globals, args []string) error {
			store, err := g.store()
			if err != nil {
				return err
			}
			keys, err := store.List(g.ctx, attach.SessionsPrefix(args[0]))
			if err != nil {
				return fmt.Errorf("sessions of %s: %w", args[0], err)
			}
			if play == "" {
				return listSessions(g, store, args[0], keys)
			}
			n, err := strconv.Atoi(play)
			if err != nil || n < 1 || n > len(keys) {
				return cli.Usagef("--play %s: give a session's number, 1 to %d (`starter sessions %s`)", play, len(keys), args[0])
			}
			b, err := blob.ReadAll(g.ctx, store, keys[n-1].Key, attach.MaxCast+1<<20)
			if err != nil {
				return err
			}
			return playCast(g.raw, b, speed, idle)
		}),
	}
	cmd.Flags().StringVar(&play, "play", "", "replay session N as it was seen")
	cmd.Flags().Float64Var(&speed, "speed", 1, "replay this many times faster")
	cmd.Flags().DurationVar(&idle, "idle", 2*time.Second, "replay idle stretches as at most this long")
	return cmd
}

func listSessions(g *globals, store blob.Store, runID string, keys []blob.Object) error {
	if len(keys) == 0 {
		fmt.Fprintf(g.out, "no session recorded for %s (a person's run records each `starter attach`)\n", runID)
		return nil
	}
	for i, k := range keys {
		b, err := blob.ReadAll(g.ctx, store, k.Key, attach.MaxCast+1<<20)
		if err != nil {
			return err
		}
		h, _, last, err := attach.ReadCast(b)
		if err != nil {
			return fmt.Errorf("%s: %w", k.Key, err)
		}
		fmt.Fprintf(g.out, "%d  %s  %s  %s  %dx%d\n", i+1, path.Base(k.Key), time.Unix(h.Timestamp, 0).UTC().Format(time.DateTime), (time.Duration(last * float64(time.Second))).Round(time.Second), h.Width, h.Height)
	}
	fmt.Fprintf(g.out, "replay one: starter sessions %s --play N\n", runID)
	return nil
}

// playCast writes a cast's output with its timing (idle stretches cut to
// idle, all of it speed times faster).
func playCast(out io.Writer, b []byte, speed float64, idle time.Duration) error {
	if speed <= 0 {
		return cli.Usagef("--speed %g: must be positive", speed)
	}
	_, events, _, err := attach.ReadCast(b)
	if err != nil {
		return err
	}
	prev := 0.0
	for _, ev := range events {
		if ev.Kind != "o" {
			continue
		}
		time.Sleep(min(time.Duration((ev.At-prev)/speed*float64(time.Second)), idle))
		prev = ev.At
		if _, err := io.WriteString(out, ev.Data); err != nil {
			return err
		}
	}
	_, err = io.WriteString(out, "\r\n"+strings.Repeat("-", 8)+" end of the recording\r\n")
	return err
}
