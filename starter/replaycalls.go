// `starter replay-calls`: its flags and what it does.

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"

	"github.com/mlrb/mlrb/internal/process/app"
	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/sandbox/transcript"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/workflows"
)

// replayCallsOptions are `starter replay-calls`'s flags.
type replayCallsOptions struct {
	image, id string
	seed      int64
	json      bool
}

func (o *replayCallsOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.image, "image", "", "run this agent image (a new build) in place of the run's own")
	f.Int64Var(&o.seed, "seed", -1, "run with this seed in place of the run's own (its data differ, so its tool results should)")
	f.StringVar(&o.id, "id", "", "id of the replaying run (default: derived)")
	f.BoolVar(&o.json, "json", false, "print the replaying run's result as JSON after the verdict")
}

func replayCallsCmd() *cobra.Command {
	var o replayCallsOptions
	cmd := &cobra.Command{
		Use:   "replay-calls RUN_ID",
		Short: "re-run a run's agent against its LLM transcript: a new run whose calls are answered from the transcript, strictly, at no provider's cost (`replay` replays workflow histories)",
		Long: "Starts a run of RUN_ID's task, seed and agent (or --image, a new build) whose gateway answers each LLM call with the recorded answer when the request is the recorded one, " +
			"timestamps and durations aside, and refuses it otherwise, naming the call and where it differs. Exits 0 when the agent made every recorded call as recorded, 1 naming the first that differed.",
		Args: cobra.ExactArgs(1),
		PreRunE: func(_ *cobra.Command, args []string) error {
			if o.id != "" {
				return checkID(o.id)
			}
			return nil
		},
		RunE: run(func(g *globals, args []string) error { return runReplayCalls(g, o, args[0]) }),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// runReplayCalls starts the replaying run, waits for it, and judges it
// by its own transcript.
func runReplayCalls(g *globals, o replayCallsOptions, source string) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	store, err := runStore(g, source, func(s blob.Store) (bool, error) {
		keys, err := transcript.Keys(g.ctx, s, source, 0)
		return len(keys) > 0, err
	})
	if err != nil {
		return err
	}
	calls, err := transcript.List(g.ctx, store, source, 0)
	if err != nil {
		return err
	}
	recorded := len(transcript.Replayed(calls))
	if recorded == 0 {
		return cli.Usagef("run %s has no answered LLM call in its transcript (`starter calls %s`): nothing to replay", source, source)
	}
	in, err := replayInput(g, c, o, source)
	if err != nil {
		return err
	}
	id := o.id
	if id == "" {
		id = source + "-replay-" + randomSuffix()
	}
	run, err := app.StartRun(g.ctx, c, g.cfg.Temporal.TaskQueue, id, in, map[string]any{"replay_of": source})
	if err != nil {
		return fmt.Errorf("start the replay: %w", err)
	}
	fmt.Fprintf(g.errOut, "replaying %d calls of %s in run %s\n", recorded, source, run.GetID())
	var res runs.Result
	if err := await(g, run, &res); err != nil {
		return fmt.Errorf("replay %s: %w", run.GetID(), err)
	}
	return judgeReplay(g, o, store, source, &res, recorded)
}

// replayInput is the source's input with its transcript as the provider.
func replayInput(g *globals, c client.Client, o replayCallsOptions, source string) (workflows.RunInput, error) {
	var src workflows.RunInput
	if err := startInput(g.ctx, c, source, &src); err != nil {
		return src, notFound(err, source)
	}
	in := sameAgent(src, g.cfg)
	in.ReplayOf = source
	if o.seed >= 0 {
		in.Seed = o.seed
	}
	if o.image != "" {
		in.Image = o.image
		if d := in.AgentDef; d != nil {
			if d.Builtin != "" {
				return in, cli.Usagef("--image: run %s's agent %s is built in (%s), not an image", source, d.Name, d.Builtin)
			}
			d.Image = o.image
			if err := d.Validate(); err != nil {
				return in, cli.Usagef("--image: %v", err)
			}
		}
	}
	return in, nil
}

// judgeReplay reads the replaying run's transcript: every recorded call
// made as recorded, or the first refused, named.
func judgeReplay(g *globals, o replayCallsOptions, store blob.Store, source string, res *runs.Result, recorded int) error {
	calls, err := transcript.List(g.ctx, store, res.RunID, 0)
	if err != nil {
		return err
	}
	made := len(transcript.Replayed(calls))
	var refusal string
	for _, c := range calls {
		if c.Kind != transcript.KindLLM || c.Status != 400 || c.Response == nil {
			continue
		}
		body, err := transcript.ReadBody(g.ctx, store, res.RunID, c.Response)
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		if err == nil && json.Unmarshal(body, &e) == nil && strings.HasPrefix(e.Error.Message, transcript.ReplayRefusal) {
			refusal = e.Error.Message
			break
		}
	}
	verdict := fmt.Sprintf("replay of %s by run %s: PASS: all %d calls made as recorded (outcome %s)", source, res.RunID, recorded, res.Outcome)
	var fail error
	switch {
	case refusal != "":
		verdict = fmt.Sprintf("replay of %s by run %s: FAIL after %d of %d calls: %s", source, res.RunID, made, recorded, refusal)
		fail = errors.New("the replay differs")
	case made != recorded:
		verdict = fmt.Sprintf("replay of %s by run %s: FAIL: the agent made %d of the %d recorded calls (outcome %s)", source, res.RunID, made, recorded, res.Outcome)
		fail = errors.New("the replay is incomplete")
	}
	fmt.Fprintln(g.out, verdict)
	if o.json {
		if err := printResult(g.out, res, true); err != nil {
			return err
		}
	}
	return fail
}
