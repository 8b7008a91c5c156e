// `starter hosts`: the fleet register shown.

package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mlrb/mlrb/internal/fleet/hosts"
)

// hostView is one row of `starter hosts --json`.
type hostView struct {
	hosts.Record
	InUse int `json:"in_use"`
	Free  int `json:"free"`
	// SeenS is how long ago the worker last published; State is "up",
	// "stopped" or "silent" (not heard from for a while: gone, or cut off).
	SeenS float64 `json:"seen_s"`
	State string  `json:"state"`
}

// silentAfter: a worker publishes every 15 s; one not heard from for
// this long is gone or cut off.
const silentAfter = time.Minute

// hostsOptions are `starter hosts`'s flags.
type hostsOptions struct{ json bool }

func (o *hostsOptions) AddFlags(f *pflag.FlagSet) { f.BoolVar(&o.json, "json", false, "print JSON") }

func hostsCmd() *cobra.Command {
	var o hostsOptions
	cmd := &cobra.Command{
		Use:   "hosts",
		Short: "list the hosts: GPU type, slots in use and free, lease holders and ages",
		Args:  cobra.NoArgs,
		RunE:  run(func(g *globals, _ []string) error { return runHosts(g, o) }),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// runHosts lists the hosts that published to the store.
func runHosts(g *globals, o hostsOptions) error {
	store, err := g.store()
	if err != nil {
		return err
	}
	recs, err := hosts.List(g.ctx, store)
	if err != nil {
		return err
	}
	views := hostViews(recs, time.Now())
	if o.json {
		return printJSON(g.out, views)
	}
	if len(views) == 0 {
		fmt.Fprintf(g.out, "no host has published to %s yet (workers publish there when they start)\n", store)
		return nil
	}
	return writeHosts(g.out, views, time.Now())
}

// hostViews are the records as of now: a host not heard from for a while
// is silent.
func hostViews(recs []hosts.Record, now time.Time) []hostView {
	views := make([]hostView, 0, len(recs))
	for _, r := range recs {
		v := hostView{Record: r, InUse: len(r.Leases), Free: r.Free(), SeenS: now.Sub(r.SeenAt).Round(time.Second).Seconds(), State: "up"}
		switch {
		case r.Stopped:
			v.State, v.InUse, v.Free = "stopped", 0, 0
		case now.Sub(r.SeenAt) > silentAfter:
			v.State = "silent"
		}
		views = append(views, v)
	}
	return views
}

func writeHosts(w io.Writer, views []hostView, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tPROVIDER\tSTATE\tGPU TYPE\tDEVICES\tIN USE\tFREE\tAGE\tIDLE\tSEEN\tATTACH\tLEASES (holder, devices, age, renewed)")
	for _, v := range views {
		var ls []string
		for _, l := range v.Leases {
			ls = append(ls, fmt.Sprintf("%s %v %s ago, %s ago", l.Token, l.Devices, now.Sub(l.Since).Round(time.Second), now.Sub(l.Renewed).Round(time.Second)))
		}
		gpuType := v.GPUType
		if gpuType == "" {
			gpuType = "-"
		}
		provider := v.Source
		if v.SourceID != "" {
			provider += " " + v.SourceID
		}
		idle := "-"
		if !v.IdleSince.IsZero() {
			idle = now.Sub(v.IdleSince).Round(time.Second).String()
		}
		attach := "-" // where people reach their runs' shells (human.listen)
		if v.Attach != nil {
			attach = v.Attach.Addr
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%d\t%d\t%s\t%s\t%s ago\t%s\t%s\n", v.ID, provider, v.State, gpuType, v.Devices, v.InUse, v.Free,
			now.Sub(v.StartedAt).Round(time.Second), idle, now.Sub(v.SeenAt).Round(time.Second), attach, strings.Join(ls, "; "))
	}
	return tw.Flush()
}
