// agentCatalog loads the agent definitions once.

package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/mlrb/mlrb/agents"
	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/results/certificate"
)

func agentsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "agents", Short: "browse the agent definitions (shipped in agents/, the operator's in agents.dir)"}
	var o agentsShowOptions
	list := &cobra.Command{
		Use: "list", Short: "list agents: name, image or built-in, provider, model, definition hash", Args: cobra.NoArgs,
		RunE: run(func(g *globals, _ []string) error { return runAgentsList(g) }),
	}
	show := &cobra.Command{
		Use: "show NAME", Short: "show an agent's definition, its file and its hash", Args: cobra.ExactArgs(1),
		RunE: run(func(g *globals, args []string) error { return runAgentsShow(g, o, args[0]) }),
	}
	o.AddFlags(show.Flags())
	cmd.AddCommand(list, show)
	return cmd
}

type agentsShowOptions struct{ json bool }

func (o *agentsShowOptions) AddFlags(f *pflag.FlagSet) {
	f.BoolVar(&o.json, "json", false, "print JSON")
}

// agentCatalog loads the agent definitions once.
func (g *globals) agentCatalog() (*agents.Catalog, error) {
	if g.agentDefs != nil {
		return g.agentDefs, nil
	}
	cfg, err := g.config()
	if err != nil {
		return nil, err
	}
	c, err := agents.Load(cfg.Agents.Dir)
	if err != nil {
		return nil, &cli.UsageError{Err: err}
	}
	g.agentDefs = c
	return c, nil
}

func runAgentsList(g *globals) error {
	c, err := g.agentCatalog()
	if err != nil {
		return err
	}
	certified := certificates(g)
	tw := tabwriter.NewWriter(g.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tRUNS\tPROVIDER\tMODEL\tHASH\tCERTIFIED\tDESCRIPTION")
	for _, n := range c.Names() {
		d, _ := c.Get(n)
		runs := d.Image
		if d.Builtin != "" {
			runs = "built-in " + d.Builtin + " (mini suite)"
		}
		desc := d.Description
		if len(desc) > 60 {
			desc = desc[:57] + "..."
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Name, runs, dash(d.Provider), dash(d.Model), d.Hash()[:19], certified(d.Hash()), cli.Printable(desc))
	}
	return tw.Flush()
}

// certificates tells each definition's certification (`starter
// certify`), from the store; "—" where none is kept or the store is out
// of reach.
func certificates(g *globals) func(hash string) string {
	store, err := g.store()
	return func(hash string) string {
		if err != nil {
			return "—"
		}
		c, err := certificate.Load(g.ctx, store, hash)
		if err != nil || c == nil {
			return "—"
		}
		return c.Line()
	}
}

func dash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func runAgentsShow(g *globals, o agentsShowOptions, name string) error {
	c, err := g.agentCatalog()
	if err != nil {
		return err
	}
	d, err := c.Get(name)
	if err != nil {
		return cli.Usagef("%v", err)
	}
	if o.json {
		return printJSON(g.out, map[string]any{"definition": d, "hash": d.Hash(), "file": c.Source(name)})
	}
	b, err := yaml.Marshal(d)
	if err != nil {
		return fmt.Errorf("agent %s: %w", name, err)
	}
	fmt.Fprintf(g.out, "# %s (hash %s)\n%s", c.Source(name), d.Hash(), b)
	return nil
}

// agentsOf looks the names up in the catalogue, naming the flag.
func agentsOf(g *globals, flag string, names []string) ([]agents.Definition, error) {
	c, err := g.agentCatalog()
	if err != nil {
		return nil, err
	}
	out := make([]agents.Definition, 0, len(names))
	for _, n := range names {
		d, err := c.Get(strings.TrimSpace(n))
		if err != nil {
			return nil, cli.Usagef("%s: %v", flag, err)
		}
		out = append(out, d)
	}
	return out, nil
}
