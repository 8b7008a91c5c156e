// `starter bundle`: its flags and what it does.

package main

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mlrb/mlrb/agents"
	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/process/app"
	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/results/runresults"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/bundle"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
	"github.com/mlrb/mlrb/tasks"
)

func keysCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "keys", Short: "the operator's signing keys for run bundles"}
	var prefix string
	newCmd := &cobra.Command{
		Use: "new -o PREFIX", Short: "write a new ed25519 key pair: PREFIX (private, 0600) and PREFIX.pub (give it to verifiers)", Args: cobra.NoArgs,
		RunE: run(func(g *globals, _ []string) error {
			if prefix == "" {
				return cli.Usagef("keys new: -o PREFIX is required (the private key is written there, its public key at PREFIX.pub)")
			}
			id, err := bundle.NewKeys(prefix)
			if err != nil {
				return cli.Usagef("keys new: %v", err)
			}
			fmt.Fprintf(g.out, "wrote %s (private: set bundle.signing_key to it) and %s.pub (public: verifiers pass it to --trust)\nkey id %s\n", prefix, prefix, id)
			return nil
		}),
	}
	newCmd.Flags().StringVarP(&prefix, "output", "o", "", "where to write the private key; the public key goes to PREFIX.pub")
	cmd.AddCommand(newCmd)
	return cmd
}

// bundleOptions are `starter bundle`'s flags.
type bundleOptions struct {
	out             string
	marks, sessions bool
	key             string
}

func (o *bundleOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVarP(&o.out, "output", "o", "", "bundle directory (a benchmark's runs share its chunks)")
	f.BoolVar(&o.marks, "marks", false, "also bundle the checkpoints the curve's marks scored")
	f.BoolVar(&o.sessions, "with-sessions", false, "keep a person's run's session recordings and notes in the bundle (left out by default: a published bundle cannot be recalled)")
	f.StringVar(&o.key, "key", "", "signing key (default: bundle.signing_key)")
}

func bundleCmd() *cobra.Command {
	var o bundleOptions
	cmd := &cobra.Command{
		Use:   "bundle RUN_ID|BENCHMARK_ID -o DIR",
		Short: "write signed, self-contained run bundles a third party can verify and re-score",
		Args:  cobra.ExactArgs(1),
		RunE:  run(func(g *globals, args []string) error { return runBundle(g, o, args[0]) }),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func runBundle(g *globals, o bundleOptions, id string) error {
	if o.out == "" {
		return cli.Usagef("bundle: -o DIR is required")
	}
	cfg, cat, err := g.catalog()
	if err != nil {
		return err
	}
	keyPath := o.key
	if keyPath == "" {
		keyPath = cfg.Bundle.SigningKey
	}
	if keyPath == "" {
		return cli.Usagef("bundle: no signing key: set bundle.signing_key (or --key) to a key `starter keys new -o PREFIX` wrote")
	}
	if err := config.PrivateFile("bundle.signing_key", keyPath); err != nil {
		return cli.Usagef("%v", err)
	}
	signer, err := bundle.LoadSigner(keyPath)
	if err != nil {
		return cli.Usagef("bundle.signing_key: %v", err)
	}
	store, err := g.store()
	if err != nil {
		return err
	}
	ids, err := storedRuns(g, store, id)
	if err != nil {
		return err
	}
	w := &bundle.Writer{Dir: o.out, Store: store, Signer: signer, Parallel: cfg.Storage.Parallel, WithSessions: o.sessions}
	defs, err := g.agentCatalog()
	if err != nil {
		return err
	}
	engine := app.Engine(store, cfg)
	for _, runID := range ids {
		in, err := bundleInput(g, engine, cat, defs, runID, o.marks)
		if err != nil {
			return err
		}
		wr, err := w.Run(g.ctx, *in)
		if err != nil {
			return err
		}
		fmt.Fprintf(g.out, "bundled %s: %d files, %.1f MiB, checkpoint #%d's %d chunks (%d new here)\n", runID, len(wr.Subjects), float64(wr.Bytes)/(1<<20), in.Final, wr.Chunks, wr.NewChunks)
	}
	fmt.Fprintf(g.out, "%d run(s) in %s, signed by key %s: check with `starter verify %s --trust %s.pub`\n", len(ids), o.out, mustKeyID(signer), o.out, keyPath)
	return nil
}

func mustKeyID(s *bundle.Signer) string {
	id, _ := s.KeyID()
	return id
}

// storedRuns is id when the store holds a result of that run, else the
// runs of the benchmark id whose results the store holds.
func storedRuns(g *globals, store blob.Store, id string) ([]string, error) {
	if ok, err := store.Exists(g.ctx, runresults.Key(id)); err != nil || ok {
		return []string{id}, err
	}
	ids, err := runresults.Stored(g.ctx, store, id)
	if err == nil && len(ids) == 0 {
		err = cli.Usagef("the store %s holds no result of a run or benchmark %q", store, id)
	}
	return ids, err
}

func markSeqs(r *runs.Result, final int) []int {
	var out []int
	for _, m := range r.Curve {
		if m.Seq > 0 && m.Seq != final && !slices.Contains(out, m.Seq) {
			out = append(out, m.Seq)
		}
	}
	slices.Sort(out)
	return out
}

// bundleInput gathers what a run's bundle says beside its stored record:
// the task spec it ran (this starter's catalog must hold the same, by
// hash), its agent's definition, its evaluator.
func bundleInput(g *globals, engine *checkpoint.Engine, cat *tasks.Catalog, defs *agents.Catalog, runID string, marks bool) (*bundle.Input, error) {
	var r runs.Result
	if err := runresults.Get(g.ctx, engine.Store, runID, &r); err != nil {
		return nil, err
	}
	// The bundle carries the run's latest verdict: a result stored again
	// as it was given (audit L6) is mended first, in the store.
	if changed, err := runresults.CurrentVerdict(g.ctx, engine.Store, &r); err != nil {
		return nil, err
	} else if changed {
		b, err := json.Marshal(&r)
		if err == nil {
			err = runresults.Put(g.ctx, engine.Store, runID, b)
		}
		if err != nil {
			return nil, fmt.Errorf("mend the result of %s with its latest verdict: %w", runID, err)
		}
	}
	final := r.FinalSeq()
	if final == 0 {
		if m, err := engine.Latest(g.ctx, runID); err == nil && m.Final {
			final = m.Seq
		}
	}
	spec, err := cat.Get(r.Task)
	if err != nil {
		return nil, err
	}
	if h := spec.Hash(); h != r.SpecHash {
		return nil, cli.Usagef("bundle %s: the task spec of %s in this starter's catalog (%s) is not the one the run ran (%s): point tasks.dir at the catalog the run used", runID, r.Task, h, r.SpecHash)
	}
	agent := map[string]any{"agent": r.Agent, "image_digest": r.AgentImage}
	if d := r.AgentDef; d != nil {
		agent["definition_ref"] = d
		if def, err := defs.Get(d.Name); err == nil && def.Hash() == d.Hash {
			agent["definition"] = def
		}
	}
	in := &bundle.Input{RunID: runID, Final: final, Task: spec, Agent: agent,
		Evaluator: map[string]any{"evaluator": r.EvaluatorImage, "command": spec.Evaluation.Command, "image": spec.Evaluation.Image, "evaluations": r.Evaluations},
		Predicate: bundle.Predicate{Benchmark: r.Benchmark, Task: r.Task, SpecHash: r.SpecHash, Agent: r.Agent, Seed: r.Seed, AgentImage: r.AgentImage, Evaluator: r.EvaluatorImage}}
	if marks {
		in.Marks = markSeqs(&r, final)
	}
	return in, nil
}
