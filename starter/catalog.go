// `starter tasks list`: its flags and what it does.

package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/process/cli"
)

func tasksCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "tasks", Short: "browse the task catalog"}
	var o tasksListOptions
	list := &cobra.Command{
		Use: "list", Short: "list tasks", Args: cobra.NoArgs,
		RunE: run(func(g *globals, _ []string) error { return runTasksList(g, o) }),
	}
	o.AddFlags(list.Flags())
	show := &cobra.Command{
		Use: "show ID", Short: "show a task's spec, hash and the prompt its agent gets", Args: cobra.ExactArgs(1),
		RunE: run(func(g *globals, args []string) error { return runTasksShow(g, args[0]) }),
	}
	cmd.AddCommand(list, show)
	return cmd
}

// tasksListOptions are `starter tasks list`'s flags.
type tasksListOptions struct{ suite string }

func (o *tasksListOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.suite, "suite", "", "only this suite: full or mini")
}

// runTasksList lists the catalog's tasks.
func runTasksList(g *globals, o tasksListOptions) error {
	_, cat, err := g.catalog()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(g.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSUITE\tLIMIT\tGPU\tMETRIC\tTITLE")
	for _, id := range cat.IDs(o.suite) {
		s, _ := cat.Get(id)
		gpu := "cpu"
		if s.NeedsGPU() {
			gpu = fmt.Sprintf("%d×%s", s.Resources.GPUCount, s.Resources.GPUType)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.Suite, s.TimeLimit.D(), gpu, s.Metric.Name, s.Title)
	}
	return tw.Flush()
}

// runTasksShow prints a task's spec, its hash and its agent's prompt.
func runTasksShow(g *globals, id string) error {
	_, cat, err := g.catalog()
	if err != nil {
		return err
	}
	s, err := cat.Get(id)
	if err != nil {
		return &cli.UsageError{Err: err}
	}
	prompt, err := s.RenderPrompt()
	if err != nil {
		return err
	}
	cp := *s
	cp.Prompt = ""
	b, err := yaml.Marshal(&cp)
	if err != nil {
		return err
	}
	fmt.Fprintf(g.out, "# %s\n# hash %s\n%s\n--- prompt the agent gets ---\n%s", s.Title, s.Hash(), b, prompt)
	return nil
}

func configCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "inspect the effective configuration"}
	show := &cobra.Command{
		Use: "show", Short: "print the effective config (defaults < file < MLRB_* env < flags), secrets redacted", Args: cobra.NoArgs,
		RunE: run(func(g *globals, _ []string) error {
			cfg, err := g.config()
			if err != nil {
				return err
			}
			fmt.Fprint(g.out, cfg.Redacted())
			return nil
		}),
	}
	keys := &cobra.Command{
		Use: "keys", Short: "print every config key with its default, env variable, flag and meaning (docs/operate/configuration.md)", Args: cobra.NoArgs,
		RunE: run(func(g *globals, _ []string) error {
			fmt.Fprint(g.out, config.Markdown())
			return nil
		}),
	}
	cmd.AddCommand(show, keys)
	return cmd
}
