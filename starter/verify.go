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
	"github.com/mlrb/mlrb/internal/app"
	"github.com/mlrb/mlrb/internal/blob"
	"github.com/mlrb/mlrb/internal/bundle"
	"github.com/mlrb/mlrb/internal/cli"
	"github.com/mlrb/mlrb/internal/runs"
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
	disagree := 0
	for _, c := range checked {
		ok, err := rescoreOne(g, evals, dir, c, o.image)
		if err != nil {
			return fmt.Errorf("rescore %s: %w", c.RunID, err)
		}
		if !ok {
			disagree++
		}
	}
	if disagree > 0 {
		return fmt.Errorf("%d of %d re-scored run(s) disagree with their bundle", disagree, len(checked))
	}
	return nil
}

// rescoreOne evaluates a verified bundle's final checkpoint as a run's
// final evaluation does and tells whether the scores agree.
func rescoreOne(g *globals, evals *activities.Evaluations, dir string, c *bundle.Checked, flagImage string) (bool, error) {
	image := flagImage
	var r runs.Result
	if err := json.Unmarshal(c.Predicate.Result, &r); err != nil {
		return false, fmt.Errorf("its result: %w", err)
	}
	var spec tasks.Spec
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(bundle.MetaDir(c.RunID)), bundle.TaskFile))
	if err == nil {
		err = json.Unmarshal(b, &spec)
	}
	if err != nil {
		return false, fmt.Errorf("its task spec: %w", err)
	}
	if spec.Hash() != c.Predicate.SpecHash {
		return false, fmt.Errorf("its task spec hashes to %s, the statement says %s", spec.Hash(), c.Predicate.SpecHash)
	}
	if c.Predicate.Final == 0 {
		fmt.Fprintf(g.out, "rescore %s: the run ended with no checkpoint (%s): nothing to score\n", c.RunID, r.Outcome)
		return r.Score == nil, nil
	}
	if image == "" && strings.HasPrefix(c.Predicate.Evaluator, "sha256:") {
		image = c.Predicate.Evaluator
	}
	in := activities.EvalInput{RunID: c.RunID, Task: spec, Seed: r.Seed, Final: activities.CheckpointRef{Seq: c.Predicate.Final}, Image: image, N: 1}
	res, err := evals.Evaluate(g.ctx, in)
	if err != nil {
		fmt.Fprintf(g.out, "rescore %s: bundle %s; here: %v\n", c.RunID, scoreText(&r), err)
		return r.Score == nil, nil
	}
	return reportRescore(g, c, &r, res, spec.Evaluation.Tolerance, flagImage), nil
}

// reportRescore prints the bundle's score beside the new one and tells
// whether they agree: exactly, or within the task's tolerance. Under
// another evaluator the difference is shown and named: asked for (flag),
// it is what was wanted; found (the evaluator here is not the bundle's),
// it is no agreement.
func reportRescore(g *globals, c *bundle.Checked, r *runs.Result, res *activities.EvalResult, tol float64, asked string) bool {
	other := asked != ""
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
	scored := r.Score
	if v := r.Review; scored == nil && v != nil && v.Score != nil {
		// A verdict took the score off the board; the evaluator's is kept.
		scored = v.Score
		fmt.Fprintf(g.out, "  (marked %s on review by %s: its evaluated score %.6g does not count)\n", v.Verdict, v.By, *scored)
	}
	if scored == nil {
		fmt.Fprintf(g.out, "  the bundle's run has no score (%s): nothing to agree with\n", r.Outcome)
		return false
	}
	d := res.Score - *scored
	switch {
	case !same || other:
		fmt.Fprintf(g.out, "  difference %+.6g under another evaluator (%s, the run's %s): not a check of the run's score\n", d, res.Image, c.Predicate.Evaluator)
		if !other {
			fmt.Fprintln(g.out, "  DISAGREE: this host's evaluator is not the bundle's (--image scores under another one deliberately)")
		}
		return other
	case len(res.Violations) > 0 && r.Outcome != runs.OutcomeDisqualified:
		fmt.Fprintln(g.out, "  DISAGREE: the model breaks its task's rules here")
		return false
	case d == 0:
		fmt.Fprintln(g.out, "  agree: exactly")
		return true
	case math.Abs(d) <= tol:
		fmt.Fprintf(g.out, "  agree: within the task's tolerance %g (difference %+.6g)\n", tol, d)
		return true
	}
	fmt.Fprintf(g.out, "  DISAGREE: difference %+.6g (the task's tolerance is %g)\n", d, tol)
	return false
}
