// `starter certify`: its flags and what it does.

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mlrb/mlrb/internal/process/app"
	"github.com/mlrb/mlrb/internal/process/certify"
	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/results/certificate"
	"github.com/mlrb/mlrb/tasks"
)

// certifyOptions are `starter certify`'s flags.
type certifyOptions struct {
	task, worker               string
	timeLimit, short, extendBy time.Duration
	json                       bool
}

func (o *certifyOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.task, "task", "mini_baby_lm", "the task the scenarios run (a mini task unless named)")
	f.DurationVar(&o.timeLimit, "time-limit", 3*time.Minute, "the plain and the crashed run's budget")
	f.DurationVar(&o.short, "deadline", 8*time.Second, "the SIGTERM and the extended run's budget: the agent must still be working at it")
	f.DurationVar(&o.extendBy, "extend-by", time.Minute, "what the extended run is given while it runs")
	f.StringVar(&o.worker, "worker", "", "the worker binary the scenarios run on (default: `worker` or `mlrb-worker` beside this binary, else on PATH)")
	f.BoolVar(&o.json, "json", false, "print the certificate as JSON")
}

func (o certifyOptions) check() error {
	switch {
	case o.timeLimit < 30*time.Second:
		return cli.Usagef("--time-limit %s: give the plain and crashed runs at least 30s", o.timeLimit)
	case o.short < 4*time.Second || o.short >= o.timeLimit:
		return cli.Usagef("--deadline %s: from 4s to below --time-limit", o.short)
	case o.extendBy < o.short:
		return cli.Usagef("--extend-by %s: at least --deadline (%s), so the extension is seen", o.extendBy, o.short)
	}
	return nil
}

func certifyCmd() *cobra.Command {
	var o certifyOptions
	cmd := &cobra.Command{
		Use:   "certify AGENT",
		Short: "run an agent through the contract's scenarios (plain, SIGTERM, a worker killed mid-run, an extended deadline, the sandbox) on a worker of its own, and keep its certificate",
		Long: "Each scenario is a real run of AGENT's definition on a worker certify starts (its own embedded server, this config's store, runtime and gateway): " +
			"a plain run, SIGTERM at the deadline, the worker SIGKILLed mid-run and started again, the deadline extended while it runs, and the sandbox it ran in. " +
			"Each check passes, fails or does not apply, with its evidence; the certificate is kept under the definition's hash (`starter agents list` shows it). Exits 1 when a check failed.",
		Args:    cobra.ExactArgs(1),
		PreRunE: func(*cobra.Command, []string) error { return o.check() },
		RunE:    run(func(g *globals, args []string) error { return runCertify(g, o, args[0]) }),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func runCertify(g *globals, o certifyOptions, name string) error {
	defs, err := agentsOf(g, "AGENT", []string{name})
	if err != nil {
		return err
	}
	def := defs[0]
	cat, err := tasks.Load(g.cfg.Tasks.Dir)
	if err != nil {
		return &cli.UsageError{Err: err}
	}
	spec, err := cat.Get(o.task)
	if err != nil {
		return cli.Usagef("--task: %v", err)
	}
	if err := def.CheckTask(spec.ID, spec.Suite == "mini"); err != nil {
		return cli.Usagef("%v", err)
	}
	bin, err := workerBinary(o.worker)
	if err != nil {
		return err
	}
	store, err := g.store()
	if err != nil {
		return err
	}
	fmt.Fprintf(g.errOut, "certifying %s (%s) on %s with %s\n", def.Name, def.Hash()[:19], spec.ID, bin)
	cert, err := certify.Run(g.ctx, certify.Options{Agent: def, Task: spec.ID, TimeLimit: o.timeLimit, Short: o.short, ExtendBy: o.extendBy,
		WorkerBin: bin, Config: g.cfg, Store: store, Progress: g.errOut})
	if err != nil {
		return err
	}
	if o.json {
		if err := printJSON(g.out, cert); err != nil {
			return err
		}
	} else if err := printCertificate(g, cert); err != nil {
		return err
	}
	if !cert.Passed() {
		return errors.New(def.Name + " is not certified: " + cert.Line())
	}
	return nil
}

// workerBinary is the worker the scenarios run on.
func workerBinary(flag string) (string, error) {
	if flag != "" {
		if _, err := os.Stat(flag); err != nil {
			return "", cli.Usagef("--worker: %v", err)
		}
		return flag, nil
	}
	if p, ok := app.Sibling("worker", "mlrb-worker"); ok {
		return p, nil
	}
	if p, err := exec.LookPath("mlrb-worker"); err == nil {
		return p, nil
	}
	return "", cli.Usagef("--worker: no worker binary beside this one or on PATH: build it (`task build`: bin/worker) and name it")
}

func printCertificate(g *globals, c *certificate.Certificate) error {
	fmt.Fprintf(g.out, "%s (%s) on %s under %s: %s\n", c.Agent, c.DefinitionHash[:19], c.Task, c.Runtime, c.Line())
	tw := tabwriter.NewWriter(g.out, 0, 4, 2, ' ', 0)
	for _, ch := range c.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", ch.Name, strings.ToUpper(string(ch.Status)), ch.Summary)
		for _, e := range ch.Evidence {
			fmt.Fprintf(tw, "\t\t  %s\n", e)
		}
	}
	return tw.Flush()
}
