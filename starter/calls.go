// `starter calls`: its flags and what it does.

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"

	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/sandbox/transcript"
	"github.com/mlrb/mlrb/internal/store/blob"
)

// callsOptions are `starter calls`'s flags.
type callsOptions struct {
	attempt, call int
	follow, json  bool
}

func (o *callsOptions) AddFlags(f *pflag.FlagSet) {
	f.IntVar(&o.attempt, "attempt", 0, "only this attempt's calls (default: every attempt's)")
	f.IntVar(&o.call, "call", 0, "print this call (its seq; with --attempt when the run had several) with its request and response")
	f.BoolVar(&o.follow, "follow", false, "keep listing calls as they are recorded, until the run ends")
	f.BoolVar(&o.json, "json", false, "print JSON (one record per line)")
}

func callsCmd() *cobra.Command {
	var o callsOptions
	cmd := &cobra.Command{
		Use:   "calls RUN_ID",
		Short: "list a run's LLM calls and connections from its transcript (time, model, tokens, dollars, latency, status); --call N prints one",
		Args:  cobra.ExactArgs(1),
		RunE:  run(func(g *globals, args []string) error { return runCalls(g, o, args[0]) }),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func runCalls(g *globals, o callsOptions, id string) error {
	if o.attempt < 0 || o.call < 0 {
		return cli.Usagef("--attempt and --call are numbers from 1")
	}
	store, err := runStore(g, id, func(s blob.Store) (bool, error) {
		keys, err := transcript.Keys(g.ctx, s, id, 0)
		return len(keys) > 0, err
	})
	if err != nil {
		return err
	}
	if o.call > 0 {
		return printCall(g, o, store, id)
	}
	var c client.Client
	if o.follow {
		if c, err = g.client(); err != nil {
			return err
		}
	}
	seen := map[string]bool{}
	// What the agent sent (model names, hosts) reaches a terminal inert.
	tw := tabwriter.NewWriter(g.out, 2, 4, 2, ' ', 0)
	if !o.json {
		fmt.Fprintln(tw, "ATTEMPT\tSEQ\tTIME\tKIND\tMODEL / HOST\tSTATUS\tIN\tCACHED\tOUT\tUSD\tLATENCY\tNOTE")
	}
	for {
		keys, err := transcript.Keys(g.ctx, store, id, o.attempt)
		if err != nil {
			return err
		}
		calls, err := transcript.Read(g.ctx, store, unseen(keys, seen))
		if err != nil {
			return err
		}
		if err := writeCalls(tw, g.out, calls, o.json); err != nil {
			return err
		}
		_ = tw.Flush()
		if !o.follow {
			if len(seen) == 0 {
				return cli.Usagef("run %q has no recorded calls in %s", id, store)
			}
			return nil
		}
		if busy, _, err := running(g.ctx, c, id); err != nil || !busy {
			return err
		}
		select {
		case <-g.ctx.Done():
			return nil
		case <-time.After(2 * time.Second):
		}
	}
}

// unseen are the keys not seen yet, which it marks seen.
func unseen(keys []string, seen map[string]bool) []string {
	var fresh []string
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			fresh = append(fresh, k)
		}
	}
	return fresh
}

// writeCalls lists records, as table rows or JSON lines.
func writeCalls(tw io.Writer, out io.Writer, calls []transcript.Call, asJSON bool) error {
	for _, c := range calls {
		if asJSON {
			b, err := json.Marshal(c)
			if err != nil {
				return err
			}
			fmt.Fprintln(out, string(b))
			continue
		}
		what, note := c.Model, c.Error
		if c.Kind == transcript.KindConnect {
			what = c.Host
			if c.Error == "" {
				note = fmt.Sprintf("%d B out, %d B in", c.Sent, c.Received)
			}
		}
		if c.RetryAfterS > 0 {
			note = fmt.Sprintf("rate limited: retry after %.0f s", c.RetryAfterS)
		}
		if c.Usage.Estimated > 0 {
			note = "no usage reported: charged its worst case"
		}
		t := c.Usage.Tokens
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%.4f\t%.0f ms\t%s\n", c.Attempt, c.Seq, c.Start.Local().Format("15:04:05"), kindOf(c), what,
			c.Status, t.Input, t.CacheRead, t.Output, c.Usage.USD, c.LatencyMS, note)
	}
	return nil
}

func kindOf(c transcript.Call) string {
	if c.Kind == transcript.KindConnect {
		return "connect"
	}
	if c.Stream {
		return string(c.API) + " (stream)"
	}
	return string(c.API)
}

// printCall prints one record with its request and response bodies.
func printCall(g *globals, o callsOptions, store blob.Store, id string) error {
	keys, err := transcript.Keys(g.ctx, store, id, o.attempt)
	if err != nil {
		return err
	}
	calls, err := transcript.Read(g.ctx, store, keys)
	if err != nil {
		return err
	}
	var found []transcript.Call
	for _, c := range calls {
		if c.Seq == o.call {
			found = append(found, c)
		}
	}
	switch {
	case len(found) == 0:
		return cli.Usagef("--call %d: run %s has no such call (see `starter calls %s`)", o.call, id, id)
	case len(found) > 1:
		return cli.Usagef("--call %d: attempts %d and %d both have one: name the attempt (--attempt)", o.call, found[0].Attempt, found[1].Attempt)
	}
	c := found[0]
	req, err := transcript.ReadBody(g.ctx, store, id, c.Request)
	if err != nil {
		return err
	}
	resp, err := transcript.ReadBody(g.ctx, store, id, c.Response)
	if err != nil {
		return err
	}
	if o.json {
		return json.NewEncoder(g.out).Encode(struct {
			transcript.Call
			RequestBody  string `json:"request_body"`
			ResponseBody string `json:"response_body"`
		}{c, string(req), string(resp)})
	}
	b, _ := json.MarshalIndent(c, "", "  ")
	fmt.Fprintf(g.out, "%s\n\n--- request (%d bytes)\n%s\n\n--- response (%d bytes)\n%s\n", b, len(req), req, len(resp), resp)
	return nil
}
