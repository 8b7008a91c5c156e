// `starter verify`: bundles checked against the trusted keys.

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/store/bundle"
	"github.com/mlrb/mlrb/internal/store/safefs"
)

func verifyCmd() *cobra.Command {
	var trust []string
	var current bool
	cmd := &cobra.Command{
		Use:   "verify DIR [--trust PUBKEY ...] [--store]",
		Short: "check run bundles: the signature against trusted keys, every file's SHA-256, every chunk against its manifest (no server, store or network)",
		Long: "Exit 0 listing what was checked; 1 naming the first file, chunk or signature that differs from what was signed,\n" +
			"or (--store) a run bundled again since or given a verdict the bundle lacks; 2 for a directory that is not a bundle,\n" +
			"or no trusted key.",
		Args: cobra.ExactArgs(1),
		RunE: run(func(g *globals, args []string) error {
			root, checked, err := verifyBundles(g, args[0], trust, "")
			if root != nil {
				_ = root.Close()
			}
			if err != nil || !current {
				return err
			}
			return checkCurrent(g, checked)
		}),
	}
	cmd.Flags().StringArrayVar(&trust, "trust", nil, "an operator's public key (PREFIX.pub from `starter keys new`); repeat for several")
	cmd.Flags().BoolVar(&current, "store", false, "also check each run against this starter's store (storage.*): bundled again since, or given a newer verdict")
	return cmd
}

// verifyBundles verifies every run bundled in dir (or only runID) with
// the trusted keys, and returns the bundle's directory, open: whatever
// reads the bundle after verify reads the verified files from it
// (bundle.Union), never the path again. No key given is bad input: a
// bundle carries its signer's key, but a key that came with the bundle
// proves nothing of who signed it.
func verifyBundles(g *globals, dir string, trust []string, runID string) (*safefs.Dir, []*bundle.Checked, error) {
	if len(trust) == 0 {
		return nil, nil, cli.Usagef("--trust: give the operator's public key (PREFIX.pub from `starter keys new`, published by whoever ran the runs); the key a bundle carries (bundle/%s) is not one to trust", bundle.SignerFile)
	}
	var trusted []*bundle.Verifier
	for _, p := range trust {
		v, err := bundle.LoadVerifier(p)
		if err != nil {
			return nil, nil, cli.Usagef("--trust: %v", err)
		}
		trusted = append(trusted, v)
	}
	keys, err := bundle.Find(dir)
	if err != nil {
		return nil, nil, &cli.UsageError{Err: err}
	}
	root, err := safefs.OpenDir(dir)
	if err != nil {
		return nil, nil, &cli.UsageError{Err: fmt.Errorf("bundle %s: %w", dir, err)}
	}
	checked, err := verifyEach(g, root, dir, keys, trusted, runID)
	if err != nil {
		_ = root.Close()
		return nil, nil, err
	}
	return root, checked, nil
}

// verifyEach verifies the runs whose envelopes are at keys (or only runID's).
func verifyEach(g *globals, root *safefs.Dir, dir string, keys []string, trusted []*bundle.Verifier, runID string) ([]*bundle.Checked, error) {
	var out []*bundle.Checked
	seen := &bundle.Seen{}
	for _, key := range keys {
		if runID != "" && key != bundle.EnvelopeKey(runID) {
			continue
		}
		start := time.Now()
		c, err := bundle.Verify(g.ctx, root, key, trusted, seen)
		var un *bundle.Unreadable
		if errors.As(err, &un) {
			return nil, &cli.UsageError{Err: err}
		}
		if err != nil {
			return nil, fmt.Errorf("verify %s: %w", dir, err)
		}
		took := time.Since(start)
		res, err := bundle.NewStore(root, c.Verified).Result(g.ctx, c.RunID)
		if err != nil {
			return nil, fmt.Errorf("verify %s: %w", dir, err)
		}
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

// checkCurrent says, for each verified run, whether the store holds a
// later bundle of it or a verdict the bundle lacks (a signature proves
// who signed, not that the bundle is current).
func checkCurrent(g *globals, checked []*bundle.Checked) error {
	store, err := g.store()
	if err != nil {
		return err
	}
	stale := 0
	for _, c := range checked {
		why, err := bundle.Stale(g.ctx, store, c)
		if err != nil {
			return err
		}
		if len(why) == 0 {
			fmt.Fprintf(g.out, "current %s: no later bundle or verdict in %s\n", c.RunID, store)
			continue
		}
		stale++
		for _, w := range why {
			fmt.Fprintf(g.out, "STALE %s: %s\n", c.RunID, w)
		}
	}
	if stale > 0 {
		return fmt.Errorf("%d of %d bundled run(s) are not their run's current record in %s", stale, len(checked), store)
	}
	return nil
}

func scoreText(r *runs.Result) string {
	if r.Score == nil {
		return string(r.Outcome) + ", no score"
	}
	return fmt.Sprintf("%s, score %.6g", r.Outcome, *r.Score)
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
