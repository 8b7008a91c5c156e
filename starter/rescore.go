// `starter rescore`: a bundle scored again with the verifier's own evaluator.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/activities/evaluation"
	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/process/app"
	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/scoring/evaldata"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/bundle"
	"github.com/mlrb/mlrb/tasks"
)

// builtinEvaluator is --evaluator's one value: this starter's own
// reference evaluator, run as a process.
const builtinEvaluator = "builtin"

func rescoreCmd() *cobra.Command {
	var o rescoreOptions
	cmd := &cobra.Command{
		Use:   "rescore DIR [--image IMAGE] [--evaluator builtin]",
		Short: "restore each bundled model, check its task's rules and evaluate it again with this host's own evaluator: the bundle's score beside the new one (no server, no original store)",
		Long: "The bundle is verified first (--trust as for verify), and only the verified files are read after. A bundle's evaluation\n" +
			"command, image and scoring code are data: the evaluator is this starter's catalog's for the task, and a run whose task\n" +
			"scores otherwise than the catalog says is not compared. Under host.runtime docker it runs in the sandbox a run's evaluation\n" +
			"gets (a container, no network but the task's door, non-root); under host.runtime process nothing is sandboxed, so rescore\n" +
			"refuses unless --evaluator builtin names mlrb's own reference evaluator (the mini tasks'). --image scores with another\n" +
			"evaluator image, named in the output. Exit 0 when every score agrees (exactly, or within the task's evaluation.tolerance).",
		Args: cobra.ExactArgs(1),
		RunE: run(func(g *globals, args []string) error { return runRescore(g, o, args[0]) }),
	}
	f := cmd.Flags()
	f.StringVar(&o.image, "image", "", "score with this evaluator image instead of the catalog's (named in the output)")
	f.StringVar(&o.evaluator, "evaluator", "", "builtin: under host.runtime process, run mlrb's own reference evaluator (the only evaluator rescore runs unsandboxed)")
	f.StringVar(&o.run, "run", "", "re-score only this run of the bundle")
	f.StringArrayVar(&o.trust, "trust", nil, "an operator's public key, as for verify")
	return cmd
}

type rescoreOptions struct {
	image, evaluator, run string
	trust                 []string
}

// check refuses, before anything is read, what would run code unsandboxed
// on this host or cannot run here.
func (o rescoreOptions) check(cfg *config.Config) error {
	switch {
	case o.evaluator != "" && o.evaluator != builtinEvaluator:
		return cli.Usagef("--evaluator %q: the one evaluator named here is %q (mlrb's own reference evaluator, as a process)", o.evaluator, builtinEvaluator)
	case o.image != "" && cfg.Host.Runtime != config.RuntimeDocker:
		return cli.Usagef("--image: an evaluator image runs under host.runtime docker; this starter's runtime is %q", cfg.Host.Runtime)
	case cfg.Host.Runtime != config.RuntimeDocker && o.evaluator != builtinEvaluator:
		return cli.Usagef("host.runtime is %q: an evaluator would run unsandboxed on this host, as you; set host.runtime docker (MLRB_HOST_RUNTIME=docker) to run the catalog's evaluator in its sandbox, or give --evaluator builtin to run mlrb's own reference evaluator (mini tasks only)", cfg.Host.Runtime)
	}
	return nil
}

func runRescore(g *globals, o rescoreOptions, dir string) error {
	cfg, cat, err := g.catalog()
	if err != nil {
		return err
	}
	if err := o.check(cfg); err != nil {
		return err
	}
	root, checked, err := verifyBundles(g, dir, o.trust, o.run)
	if err != nil {
		return err
	}
	defer func() { _ = root.Close() }()
	src := bundle.Union(root, checked)
	if err := os.MkdirAll(cfg.StateDir(""), 0o755); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	scratch, err := os.MkdirTemp(cfg.StateDir(""), "rescore-")
	if err != nil {
		return fmt.Errorf("rescore scratch dir: %w", err)
	}
	defer func() { _ = os.RemoveAll(scratch) }()
	evals, closeWS, err := app.StandaloneEvaluations(g.ctx, cfg, src, scratch, zap.NewNop())
	if err != nil {
		return err
	}
	defer closeWS()
	// A 20 GB restore takes minutes: say where it is, as a heartbeat would.
	var step string
	evals.Progress = func(h activities.Heartbeat) {
		if now := h.String(); now != "" && now != step {
			step = now
			fmt.Fprintf(g.errOut, "rescore: %s\n", now)
		}
	}
	counts := map[rescoreVerdict]int{}
	for _, c := range checked {
		v, err := rescoreRun(g, evals, src, cat, cfg, c, o)
		if err != nil {
			return fmt.Errorf("rescore %s: %w", c.RunID, err)
		}
		counts[v]++
	}
	if counts[disagreed] > 0 || counts[notCompared] > 0 {
		return fmt.Errorf("of %d run(s), %d disagree with their bundle and %d could not be compared (a run with no score agrees with nothing)", len(checked), counts[disagreed], counts[notCompared])
	}
	return nil
}

// rescoreRun re-scores one verified run, or says why it cannot be compared.
func rescoreRun(g *globals, evals *evaluation.Evaluations, src *bundle.Store, cat *tasks.Catalog, cfg *config.Config, c *bundle.Checked, o rescoreOptions) (rescoreVerdict, error) {
	r, err := bundledResult(g.ctx, src, c.RunID)
	if err != nil {
		return notCompared, err
	}
	in, why, err := rescoreInput(g.ctx, src, cat, cfg, c, r, o)
	if err != nil {
		return notCompared, err
	}
	if why != "" {
		fmt.Fprintf(g.out, "rescore %s: NOT COMPARED: %s\n", c.RunID, why)
		return notCompared, nil
	}
	return rescoreOne(g, evals, c, r, in, o.image)
}

// bundledResult is a verified run's result as bundled (its signed bytes).
func bundledResult(ctx context.Context, src *bundle.Store, runID string) (*runs.Result, error) {
	var r runs.Result
	b, err := src.Result(ctx, runID)
	if err == nil {
		err = json.Unmarshal(b, &r)
	}
	if err != nil {
		return nil, fmt.Errorf("its result: %w", err)
	}
	return &r, nil
}

// rescoreInput is the evaluation of a verified run's final checkpoint
// with this host's evaluator, or why none is made (the run has no
// checkpoint, or its task scores otherwise than this catalog's does).
func rescoreInput(ctx context.Context, src *bundle.Store, cat *tasks.Catalog, cfg *config.Config, c *bundle.Checked, r *runs.Result, o rescoreOptions) (activities.EvalInput, string, error) {
	var signed tasks.Spec
	b, err := blob.ReadAll(ctx, src, bundle.MetaDir(c.RunID)+bundle.TaskFile, 64<<20)
	if err == nil {
		err = json.Unmarshal(b, &signed)
	}
	if err != nil {
		return activities.EvalInput{}, "", fmt.Errorf("its task spec: %w", err)
	}
	if signed.Hash() != c.Predicate.SpecHash {
		return activities.EvalInput{}, "", fmt.Errorf("its task spec hashes to %s, the statement says %s", signed.Hash(), c.Predicate.SpecHash)
	}
	if c.Predicate.Final == 0 {
		return activities.EvalInput{}, fmt.Sprintf("the run ended with no checkpoint (%s): nothing to score", r.Outcome), nil
	}
	spec, why := ownEvaluator(cat, &signed)
	if why == "" && cfg.Host.Runtime != config.RuntimeDocker {
		why = builtinOnly(spec)
	}
	if why != "" {
		return activities.EvalInput{}, why, nil
	}
	// The evaluator's data sets must be here before a model is restored
	// for it (a 20 GB restore for nothing).
	if _, err := (&evaldata.Dir{Root: cfg.Eval.DataDir}).Check(spec); err != nil {
		return activities.EvalInput{}, "", &cli.UsageError{Err: err}
	}
	in := activities.EvalInput{RunID: c.RunID, Task: *spec, Seed: r.Seed, Final: activities.CheckpointRef{Seq: c.Predicate.Final}, Image: o.image, N: 1}
	if n := spec.Resources.GPUCount; n > 0 {
		gpus := cfg.Host.GPUDevices
		if len(gpus) < n {
			return activities.EvalInput{}, "", cli.Usagef("task %s is evaluated on %d GPU(s): this host has %d in host.gpu_devices", spec.ID, n, len(gpus))
		}
		in.Lease = &activities.Lease{Devices: gpus[:n]}
	}
	return in, "", nil
}

// ownEvaluator is the run's task as this starter's catalog scores it:
// the signed spec with its evaluation, rules, metric, reference and
// resources taken from the catalog's entry of the same id. Those parts
// decide the score and what runs; the run is compared only when its
// signed spec says the same of them (the merged spec hashes alike), else
// why not.
func ownEvaluator(cat *tasks.Catalog, signed *tasks.Spec) (*tasks.Spec, string) {
	own, err := cat.Get(signed.ID)
	if err != nil {
		return nil, fmt.Sprintf("task %q is not in this starter's catalog (tasks.dir): rescore runs only its own catalog's evaluator, never the bundle's", signed.ID)
	}
	merged := *signed
	merged.Evaluation, merged.Constraints, merged.Metric, merged.Reference, merged.Resources = own.Evaluation, own.Constraints, own.Metric, own.Reference, own.Resources
	if merged.Hash() != signed.Hash() {
		return nil, fmt.Sprintf("the run's task %s is scored otherwise than this starter's catalog scores it (its evaluation, rules, metric or resources differ): a score under another definition checks nothing; put the run's definition in tasks.dir to compare", signed.ID)
	}
	return &merged, ""
}

// builtinOnly says why a task cannot be re-scored as a process: only
// mlrb's own reference evaluator runs unsandboxed ("" when it is the
// task's evaluator, its curve's and checks' included).
func builtinOnly(spec *tasks.Spec) string {
	ev := spec.Evaluation
	cmds := [][]string{ev.Command}
	if ev.Curve != nil && len(ev.Curve.Command) > 0 {
		cmds = append(cmds, ev.Curve.Command)
	}
	for _, c := range cmds {
		if len(c) < 2 || c[0] != "{self}" || c[1] != "reference-eval" {
			return fmt.Sprintf("task %s is evaluated by %s, not mlrb's own reference evaluator: under host.runtime process it would run unsandboxed; re-score it under host.runtime docker", spec.ID, strings.Join(c, " "))
		}
	}
	if ev.Check != nil {
		return fmt.Sprintf("task %s runs checks on what the model wrote: re-score it under host.runtime docker", spec.ID)
	}
	return ""
}

// rescoreOne evaluates a verified run's final checkpoint as a run's final
// evaluation does, saying first what runs, and tells whether the scores
// agree.
func rescoreOne(g *globals, evals *evaluation.Evaluations, c *bundle.Checked, r *runs.Result, in activities.EvalInput, flagImage string) (rescoreVerdict, error) {
	what := "as a process: mlrb's own reference evaluator"
	if in.Image != "" {
		what = "in a container of image " + in.Image
	} else if img := in.Task.Evaluation.Image; img != "" {
		what = "in a container of image " + img
	} else if g.cfg.Host.Runtime == config.RuntimeDocker {
		what = "in a container of image " + g.cfg.Container.EvalImage
	}
	fmt.Fprintf(g.out, "rescore %s: evaluating %s with this catalog's evaluator, %s: %s\n", c.RunID, in.Task.ID, what, strings.Join(in.Task.Evaluation.Command, " "))
	res, err := evals.Evaluate(g.ctx, in)
	if err != nil {
		fmt.Fprintf(g.out, "rescore %s: bundle %s; here: %v\n", c.RunID, scoreText(r), err)
		if evaluatedScore(g, r) != nil {
			fmt.Fprintln(g.out, "  DISAGREE: the bundle's run was scored, and its model scores nothing here")
			return disagreed, nil
		}
		fmt.Fprintln(g.out, "  NOT COMPARED: neither the bundle's run nor this evaluation has a score")
		return notCompared, nil
	}
	return reportRescore(g, c, r, res, in.Task.Evaluation.Tolerance, flagImage), nil
}

// rescoreVerdict is what one re-scoring found: a score that agrees with
// its bundle's, one that does not, or no pair of scores to compare (the
// bundle's run has none, or none could be made here): never agreement.
type rescoreVerdict int

const (
	agreed rescoreVerdict = iota
	disagreed
	notCompared
)

func verdictOf(ok bool) rescoreVerdict {
	if ok {
		return agreed
	}
	return disagreed
}
