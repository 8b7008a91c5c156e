package main

import (
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/cli"
	"github.com/mlrb/mlrb/tasks"
)

// loadCatalog loads the config and the task catalog it points at; a bad
// catalog is the user's input.
func loadCatalog(cmd *cobra.Command) (*config.Config, *tasks.Catalog, error) {
	cfg, err := cli.LoadConfig(cmd)
	if err != nil {
		return nil, nil, err
	}
	cat, err := tasks.Load(cfg.Tasks.Dir)
	if err != nil {
		return nil, nil, &cli.UsageError{Err: err}
	}
	return cfg, cat, nil
}

func tasksCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "tasks", Short: "browse the task catalog"}
	var suite string
	list := &cobra.Command{
		Use: "list", Short: "list tasks", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, cat, err := loadCatalog(cmd)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSUITE\tLIMIT\tGPU\tMETRIC\tTITLE")
			for _, id := range cat.IDs(suite) {
				s, _ := cat.Get(id)
				gpu := "cpu"
				if s.NeedsGPU() {
					gpu = fmt.Sprintf("%d×%s", s.Resources.GPUCount, s.Resources.GPUType)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.Suite, s.TimeLimit.D(), gpu, s.Metric.Name, s.Title)
			}
			return tw.Flush()
		},
	}
	list.Flags().StringVar(&suite, "suite", "", "only this suite: full or mini")
	show := &cobra.Command{
		Use: "show ID", Short: "show a task's spec, hash and the prompt its agent gets", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, cat, err := loadCatalog(cmd)
			if err != nil {
				return err
			}
			s, err := cat.Get(args[0])
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
			fmt.Printf("# %s\n# hash %s\n%s\n--- prompt the agent gets ---\n%s", s.Title, s.Hash(), b, prompt)
			return nil
		},
	}
	cmd.AddCommand(list, show)
	return cmd
}

func configCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "inspect the effective configuration"}
	show := &cobra.Command{
		Use: "show", Short: "print the effective config (defaults < file < MLRB_* env < flags), secrets redacted", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := cli.LoadConfig(cmd)
			if err != nil {
				return err
			}
			fmt.Print(cfg.Redacted())
			return nil
		},
	}
	keys := &cobra.Command{
		Use: "keys", Short: "print every config key with its default, env variable, flag and meaning (the README's table)", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Print(config.Markdown())
			return nil
		},
	}
	cmd.AddCommand(show, keys)
	return cmd
}
