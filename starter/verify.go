package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/process/app"
	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/scoring/reference"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/bundle"
	"github.com/mlrb/mlrb/tasks"
)

func verifyCmd() *cobra.Command {
	var trust []string
	cmd := &cobra.Command{
		Use:   "verify DIR [--trust PUBKEY ...]",
		Short: "check run bundles: the signature against trusted keys, every file's SHA-256, every chunk against its manifest (no server, store or network)",
		Long: "Exit 0 listing what was checked; 1 naming the first file, chunk or signature that differs from what was signed;\n" +
			"2 for a directory that is not a bundle, or no trusted key.",
		Args: cobra.ExactArgs(1),
		RunE: run(func(g *globals, args []string) error {
			_, err := verifyBundles(g, args[0], trust, "")
			return err
		}),
	}
	cmd.Flags().StringArrayVar(&trust, "trust", nil, "an operator's public key (PREFIX.pub from `starter keys new`); repeat for several")
	return cmd
}

// verifyBundles verifies every run bundled in dir (or only runID) with
// the trusted keys. None given is bad input: a bundle carries its
// signer's key, but a key that came with the bundle proves nothing of
// who signed it.
func verifyBundles(g *globals, dir string, trust []string, runID string) ([]*bundle.Checked, error) {
	if len(trust) == 0 {
		return nil, cli.Usagef("--trust: give the operator's public key (PREFIX.pub from `starter keys new`, published by whoever ran the runs); the key a bundle carries (bundle/%s) is not one to trust", bundle.SignerFile)
	}
	var trusted []*bundle.Verifier
	for _, p := range trust {
		v, err := bundle.LoadVerifier(p)
		if err != nil {
			return nil, cli.Usagef("--trust: %v", err)
		}
		trusted = append(trusted, v)
	}
	keys, err := bundle.Find(dir)
	if err != nil {
		return nil, &cli.UsageError{Err: err}
	}
	var out []*bundle.Checked
	seen := &bundle.Seen{}
	for _, key := range keys {
		if runID != "" && key != bundle.EnvelopeKey(runID) {
			continue
		}
		start := time.Now()
		c, err := bundle.Verify(g.ctx, dir, key, trusted, seen)
		var un *bundle.Unreadable
		if errors.As(err, &un) {
			return nil, &cli.UsageError{Err: err}
		}
		if err != nil {
			return nil, fmt.Errorf("verify %s: %w", dir, err)
		}
		took := time.Since(start)
		res := c.Predicate.Result
		var r runs.Result
		_ = json.Unmarshal(res, &r)
		fmt.Fprintf(g.out, "verified %s (%s, agent %s, seed %d): %s\n", c.RunID, r.Task, r.Agent, r.Seed, scoreText(&r))
		fmt.Fprintf(g.out, "  signature: key %s, trusted as %s\n", c.KeyID, c.TrustedAs)
		fmt.Fprintf(g.out, "  files: %d by SHA-256 (%.1f MiB read in %s, %.0f MiB/s; those an earlier run shares were read once), %d chunks also against their BLAKE3 names, manifests %s\n",
			c.Files, float64(c.Bytes)/(1<<20), took.Round(time.Millisecond), float64(c.Bytes)/(1<<20)/max(took.Seconds(), 1e-9), c.Chunks, strings.Join(c.Manifests, ", "))
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, cli.Usagef("%s holds no bundle of run %q", dir, runID)
	}
	return out, nil
}

func scoreText(r *runs.Result) string {
	if r.Score == nil {
		return string(r.Outcome) + ", no score"
	}
	return fmt.Sprintf("%s, score %.6g", r.Outcome, *r.Score)
}

func rescoreCmd() *cobra.Command {
	var o rescoreOptions
	cmd := &cobra.Command{
		Use:   "rescore DIR [--image IMAGE]",
		Short: "restore each bundled model, check its task's rules and evaluate it again here: the bundle's score beside the new one (no server, no original store)",
		Long: "The bundle is verified first (--trust as for verify). The evaluator is the bundle's: its image by digest under\n" +
			"host.runtime docker, or the reference evaluator's scoring code by name as a process. --image scores with another\n" +
			"evaluator, named in the output. Exit 0 when every score agrees (exactly, or within the task's evaluation.tolerance).",
		Args: cobra.ExactArgs(1),
		RunE: run(func(g *globals, args []string) error { return runRescore(g, o, args[0]) }),
	}
	f := cmd.Flags()
	f.StringVar(&o.image, "image", "", "score with this evaluator image instead of the bundle's (named in the output)")
	f.StringVar(&o.run, "run", "", "re-score only this run of the bundle")
	f.StringArrayVar(&o.trust, "trust", nil, "an operator's public key, as for verify")
	return cmd
}

type rescoreOptions struct {
	image, run string
	trust      []string
}

func runRescore(g *globals, o rescoreOptions, dir string) error {
	cfg, err := g.config()
	if err != nil {
		return err
	}
	checked, err := verifyBundles(g, dir, o.trust, o.run)
	if err != nil {
		return err
	}
	src, err := blob.NewFS(dir)
	if err != nil {
		return err
	}
	if o.image != "" && cfg.Host.Runtime != config.RuntimeDocker {
		return cli.Usagef("--image: an evaluator image runs under host.runtime docker; this starter's runtime is %q", cfg.Host.Runtime)
	}
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
		v, err := rescoreOne(g, evals, dir, c, o.image, cfg.Host.GPUDevices)
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

// rescoreOne evaluates a verified bundle's final checkpoint as a run's
// final evaluation does, on this host's GPUs when the task has some,
// and tells whether the scores agree.
func rescoreOne(g *globals, evals *activities.Evaluations, dir string, c *bundle.Checked, flagImage string, gpus []int) (rescoreVerdict, error) {
	var r runs.Result
	if err := json.Unmarshal(c.Predicate.Result, &r); err != nil {
		return notCompared, fmt.Errorf("its result: %w", err)
	}
	var spec tasks.Spec
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(bundle.MetaDir(c.RunID)), bundle.TaskFile))
	if err == nil {
		err = json.Unmarshal(b, &spec)
	}
	if err != nil {
		return notCompared, fmt.Errorf("its task spec: %w", err)
	}
	if spec.Hash() != c.Predicate.SpecHash {
		return notCompared, fmt.Errorf("its task spec hashes to %s, the statement says %s", spec.Hash(), c.Predicate.SpecHash)
	}
	if c.Predicate.Final == 0 {
		fmt.Fprintf(g.out, "rescore %s: the run ended with no checkpoint (%s): NOT COMPARED, nothing to score\n", c.RunID, r.Outcome)
		return notCompared, nil
	}
	in := activities.EvalInput{RunID: c.RunID, Task: spec, Seed: r.Seed, Final: activities.CheckpointRef{Seq: c.Predicate.Final}, Image: flagImage, N: 1}
	if in.Image == "" {
		in.Image = evaluatorImage(c.Predicate.Evaluator)
	}
	if n := spec.Resources.GPUCount; n > 0 {
		if len(gpus) < n {
			return notCompared, cli.Usagef("task %s is evaluated on %d GPU(s): this host has %d in host.gpu_devices", spec.ID, n, len(gpus))
		}
		in.Lease = &activities.Lease{Devices: gpus[:n]}
	}
	res, err := evals.Evaluate(g.ctx, in)
	if err != nil {
		fmt.Fprintf(g.out, "rescore %s: bundle %s; here: %v\n", c.RunID, scoreText(&r), err)
		if evaluatedScore(g, &r) != nil {
			fmt.Fprintln(g.out, "  DISAGREE: the bundle's run was scored, and its model scores nothing here")
			return disagreed, nil
		}
		fmt.Fprintln(g.out, "  NOT COMPARED: neither the bundle's run nor this evaluation has a score")
		return notCompared, nil
	}
	return reportRescore(g, c, &r, res, spec.Evaluation.Tolerance, flagImage), nil
}

// evaluatorImage is the image a recorded evaluator names: its reference
// by digest (an image id, or repo@sha256:…); "" for the reference
// evaluator's scoring code or a process's binary, which run from this
// host's own evaluator image or binary, and are then named and compared.
func evaluatorImage(evaluator string) string {
	if evaluator == "" || reference.IsEvaluatorName(evaluator) || strings.Contains(evaluator, " ") {
		return ""
	}
	return evaluator
}

// reportRescore prints the bundle's score beside the new one and tells
// whether they agree: the same rule checks, and the same score exactly
// or within the task's tolerance. Under another evaluator the difference
// is shown and named: asked for (--image), it is what was wanted; found
// (the evaluator here is not the bundle's), it is no agreement.
func reportRescore(g *globals, c *bundle.Checked, r *runs.Result, res *activities.EvalResult, tol float64, asked string) rescoreVerdict {
	fmt.Fprintf(g.out, "rescore %s\n  bundle:   %s, evaluator %s\n", c.RunID, scoreText(r), c.Predicate.Evaluator)
	rules := "rule checks passed"
	if len(res.Violations) > 0 {
		rules = "rule checks FAILED: " + strings.Join(res.Violations, "; ")
	}
	same := res.Image == c.Predicate.Evaluator
	who := "the same evaluator"
	if !same {
		who = "ANOTHER evaluator: " + res.Image
		if asked != "" {
			who += " (--image " + asked + ")"
		}
	}
	fmt.Fprintf(g.out, "  here:     score %.6g, %s (%s)\n", res.Score, who, rules)
	scored := evaluatedScore(g, r)
	if scored == nil {
		fmt.Fprintf(g.out, "  NOT COMPARED: the bundle's run has no evaluated score (%s), so this one agrees with nothing\n", r.Outcome)
		return notCompared
	}
	d := res.Score - *scored
	switch broke := r.Outcome == runs.OutcomeDisqualified; {
	case !same:
		fmt.Fprintf(g.out, "  difference %+.6g under another evaluator (%s, the run's %s): not a check of the run's score\n", d, res.Image, c.Predicate.Evaluator)
		if asked == "" {
			fmt.Fprintln(g.out, "  DISAGREE: this host's evaluator is not the bundle's (--image scores under another one deliberately)")
		}
		return verdictOf(asked != "")
	case (len(res.Violations) > 0) != broke:
		fmt.Fprintf(g.out, "  DISAGREE: the rule checks here (%s) are not the run's (%s)\n", rules, r.Outcome)
		return disagreed
	case d == 0:
		fmt.Fprintln(g.out, "  agree: exactly")
		return agreed
	case math.Abs(d) <= tol:
		fmt.Fprintf(g.out, "  agree: within the task's tolerance %g (difference %+.6g)\n", tol, d)
		return agreed
	}
	fmt.Fprintf(g.out, "  DISAGREE: difference %+.6g (the task's tolerance is %g)\n", d, tol)
	return disagreed
}

// evaluatedScore is what the run's evaluator scored, counted or not: its
// score, the one a reviewer's verdict took off the board, or a
// disqualified model's (kept as a metric); nil when it has none.
func evaluatedScore(g *globals, r *runs.Result) *float64 {
	switch v := r.Review; {
	case r.Score != nil:
		return r.Score
	case v != nil && v.Score != nil:
		fmt.Fprintf(g.out, "  (marked %s on review by %s: its evaluated score %.6g does not count)\n", v.Verdict, v.By, *v.Score)
		return v.Score
	}
	if s, ok := r.Metrics[runs.DisqualifiedScore]; ok && r.Outcome == runs.OutcomeDisqualified {
		return &s
	}
	return nil
}
