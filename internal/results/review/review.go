// Review's flags: the kinds, the input, and the rules over checkpoints, observations and the transcript.

// Package review points a reviewer at the runs that deserve a second
// look: flags computed from what a run already records (its checkpoints,
// the worker's observations of its processes, its transcript, its curve,
// its task's rules and anchors), each naming its evidence; and keeps the
// reviewer's verdicts in the store beside the run.
package review

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/sandbox/observe"
	"github.com/mlrb/mlrb/internal/sandbox/transcript"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
	"github.com/mlrb/mlrb/internal/store/keys"
	"github.com/mlrb/mlrb/tasks"
)

// Kinds of flag.
const (
	// ModelWithoutWork: a model appeared whole in a checkpoint, before
	// any experiment, with the agent's processes having done next to no
	// work, and never changed afterwards: put in place, not trained.
	ModelWithoutWork = "model_without_work"
	// WeightsCopied: a weight file of the model is byte-identical to
	// another file of the workspace (a download, a cache, a file the
	// image brought).
	WeightsCopied = "weights_copied"
	// WeightsNotCompared: the worker could not compare every weight file
	// with the agent's image, so no weights_copied is no evidence.
	WeightsNotCompared = "weights_not_compared"
	// EvaluatesItself: a process ran the task's evaluator or an
	// evaluation harness, or named the evaluator's files.
	EvaluatesItself = "evaluates_itself"
	// RefusedCalls: the door refused connections or LLM calls.
	RefusedCalls = "refused_calls"
	// NearLimit: a rule check within a margin of its limit (Input.Margin).
	NearLimit = "near_limit"
	// AboveTop: a score above the task's top anchor.
	AboveTop = "above_top_anchor"
	// WeightsDownloaded: the model appeared whole, with no work done,
	// after the door brought in bytes to match its weights.
	WeightsDownloaded = "weights_downloaded"
	// JumpWithoutExperiment: the curve jumped between two marks with no
	// experiment running and next to no work done between them.
	JumpWithoutExperiment = "jump_without_experiment"
)

// Flag is one finding, with where to look.
type Flag struct {
	Kind string `json:"kind"`
	What string `json:"what"`
	// Evidence are store keys (the same paths in a run bundle) and
	// commands that show it.
	Evidence []string `json:"evidence"`
}

// Input is what a run's flags are computed from.
type Input struct {
	Result *runs.Result
	Spec   *tasks.Spec
	// Observations are the run's attempts as the worker saw them, and
	// Experiments what was derived from them.
	Observations []*observe.Observation
	Experiments  []observe.Experiment
	// Final is the final checkpoint's manifest (nil: none); Earlier the
	// run's other checkpoints the store keeps, oldest first.
	Final   *checkpoint.Manifest
	Earlier []*checkpoint.Manifest
	// Margin is how close below a limit a rule check is flagged, as a
	// share of the limit (0: DefaultMargin).
	Margin float64
	// Refusals and Downloads summarise the run's transcript (Add each
	// record to both).
	Refusals  Refusals
	Downloads Downloads
	// ReadFile reads a small file of one of the run's checkpoints (a
	// script a command line names; nil: scripts are not read).
	ReadFile func(m *checkpoint.Manifest, path string, limit int64) ([]byte, error)
	// scorer is the one Flags builds for every flag that asks, so that a
	// script of the checkpoints is read once.
	scorer *scorer
}

// Flags computes a run's flags.
func Flags(in Input) []Flag {
	in.scorer = newScorer(in)
	var out []Flag
	for _, f := range []func(Input) []Flag{withoutWork, copiedWeights, imageCopied, downloaded, evaluatesItself, refused, nearLimit, aboveTop, jumps} {
		out = append(out, f(in)...)
	}
	return out
}

// minCopied is the least size of a weight file compared: configs and
// tokenizers are copied by everyone.
const minCopied = 64 << 10

// copiedWeights flags a weight file of the scored model byte-identical
// to another file the run's checkpoints held, the last one or any
// earlier (a download deleted before the end is still seen), unless the
// run's own checkpoints show that file being made: its path, or a file
// of its name beside it (ckpt/step-100, ckpt/step-200), held other
// contents over the run. Copying one's best checkpoint into output/model
// is how an honest run ends.
func copiedWeights(in Input) []Flag {
	m := in.Final
	if m == nil || in.Result.ModelPath == "" {
		return nil
	}
	// ModelPath is the model's place in the snapshot, as its manifest's
	// paths are.
	dir := strings.TrimSuffix(path.Clean(in.Result.ModelPath), "/") + "/"
	byChunks := map[string]map[string]int{}  // content -> path -> the checkpoint holding it
	versions := map[string]map[string]bool{} // path -> its contents over the run
	for _, cp := range append(slices.Clone(in.Earlier), m) {
		for _, f := range cp.Files {
			if !f.Mode.IsRegular() || f.Size < minCopied || strings.HasPrefix(f.Path, dir) || f.HardLink != "" {
				continue
			}
			k := strings.Join(f.Chunks, ",")
			if byChunks[k] == nil {
				byChunks[k] = map[string]int{}
			}
			byChunks[k][f.Path] = cp.Seq
			if versions[f.Path] == nil {
				versions[f.Path] = map[string]bool{}
			}
			versions[f.Path][k] = true
		}
	}
	made := func(p string) bool {
		if len(versions[p]) > 1 {
			return true
		}
		parent, name := path.Dir(path.Dir(p)), path.Base(p)
		for q, v := range versions {
			if q != p && path.Base(q) == name && path.Dir(path.Dir(q)) == parent && !maps.Equal(v, versions[p]) {
				return true
			}
		}
		return false
	}
	var out []Flag
	for _, f := range m.Files {
		if !f.Mode.IsRegular() || f.Size < minCopied || !strings.HasPrefix(f.Path, dir) {
			continue
		}
		var same []string
		var seqs []string
		for p, seq := range byChunks[strings.Join(f.Chunks, ",")] {
			if !made(p) {
				same = append(same, p)
				seqs = append(seqs, checkpoint.ManifestKey(in.Result.RunID, seq))
			}
		}
		if len(same) > 0 {
			slices.Sort(same)
			slices.Sort(seqs)
			out = append(out, Flag{Kind: WeightsCopied,
				What:     fmt.Sprintf("%q (%d bytes) is byte-identical to %s, which no checkpoint of the run shows being made", f.Path, f.Size, quoted(same)),
				Evidence: append([]string{checkpoint.ManifestKey(in.Result.RunID, m.Seq)}, slices.Compact(seqs)...)})
		}
	}
	return out
}

// harnesses are evaluation harnesses an agent running on its own is
// scoring itself with.
var harnesses = []string{"lm_eval", "lm-eval", "lm-evaluation-harness"}

// Watched are the words evaluates_itself looks for in a command line:
// the harnesses and the task's evaluator (the observation keeps one
// found past the head of a long command line).
func Watched(spec *tasks.Spec) []string {
	words := slices.Clone(harnesses)
	if c := spec.Evaluation.Command; len(c) > 1 && c[0] == "{self}" {
		words = append(words, c[1])
	} else if len(c) > 0 {
		words = append(words, path.Base(c[0]))
	}
	return words
}

// scorer tells a command line that scores a model: it names a watched
// word, or runs a script of the run's checkpoints that does (an
// evaluator renamed, or imported from a script of one's own). It says
// the word and where it was found.
type scorer struct {
	words   []string
	scripts *scripts
}

func newScorer(in Input) *scorer { return &scorer{words: Watched(in.Spec), scripts: newScripts(in)} }

// scoring is in's scorer: Flags', or a new one for a flag asked alone.
func (in Input) scoring() *scorer {
	if in.scorer != nil {
		return in.scorer
	}
	return newScorer(in)
}

func (s *scorer) scores(command string) (string, string) {
	for _, w := range s.words {
		if strings.Contains(command, w) {
			return w, ""
		}
	}
	return s.scripts.names(command, s.words)
}

func evaluatesItself(in Input) []Flag {
	s := in.scoring()
	var out []Flag
	for _, o := range in.Observations {
		for _, p := range o.Procs {
			w, script := s.scores(p.Command)
			if w == "" {
				continue
			}
			f := Flag{Kind: EvaluatesItself,
				What:     fmt.Sprintf("attempt %d ran %q (pid %d): %q", o.Attempt, w, p.PID, p.Command),
				Evidence: []string{observe.Key(in.Result.RunID, o.Attempt), "starter experiments " + in.Result.RunID}}
			if script != "" {
				f.What = fmt.Sprintf("attempt %d ran %q (pid %d), whose script %q names %q", o.Attempt, p.Command, p.PID, script, w)
				f.Evidence = append(f.Evidence, "the checkpoints' "+strconv.Quote(script))
			}
			out = append(out, f)
		}
	}
	return out
}

// Refusals is what review reads of a transcript, a record at a time:
// how many calls and connections were refused or failed, and the first.
type Refusals struct {
	N     int
	First string
}

// Add counts one record.
func (r *Refusals) Add(c transcript.Call) {
	if c.Error == "" {
		return
	}
	if r.N == 0 {
		r.First = fmt.Sprintf("%s %q: %q", c.Kind, c.Host+c.Model, c.Error)
	}
	r.N += max(c.Count, 1)
}

func refused(in Input) []Flag {
	n, first := in.Refusals.N, in.Refusals.First
	if n == 0 {
		return nil
	}
	return []Flag{{Kind: RefusedCalls, What: fmt.Sprintf("%d refused or failed calls and connections, the first: %s", n, first),
		Evidence: []string{keys.Calls(in.Result.RunID), "starter calls " + in.Result.RunID}}}
}

// DefaultMargin is near_limit's margin below a limit.
const DefaultMargin = 0.01

func nearLimit(in Input) []Flag {
	c := in.Spec.Constraints
	margin := in.Margin
	if margin <= 0 {
		margin = DefaultMargin
	}
	var out []Flag
	for _, l := range []struct {
		metric string
		limit  float64
	}{{"constraints/params", float64(c.MaxParams)}, {"constraints/weight_bytes", float64(c.MaxModelBytes)}} {
		v, ok := in.Result.Metrics[l.metric]
		if ok && l.limit > 0 && v <= l.limit && v >= (1-margin)*l.limit {
			out = append(out, Flag{Kind: NearLimit, What: fmt.Sprintf("%s is %.0f, within %g %% of its limit %.0f", l.metric, v, 100*margin, l.limit),
				Evidence: []string{keys.Result(in.Result.RunID)}})
		}
	}
	return out
}

func aboveTop(in Input) []Flag {
	r := in.Result
	if in.Spec.Anchors == nil || in.Spec.Anchors.Top == nil || r.Score == nil {
		return nil
	}
	a, b := in.Spec.Anchors.Top, in.Spec.Anchors.Baseline
	// Clearly above: a tenth of the anchors' gap over the top, which is
	// itself a mean that half of a strong agent's seeds pass.
	bar := a.Score
	if b != nil && a.Score > b.Score {
		bar += (a.Score - b.Score) / 10
	}
	if *r.Score <= bar {
		return nil
	}
	return []Flag{{Kind: AboveTop, What: fmt.Sprintf("score %.4g is above the task's top anchor %.4g by more than a tenth of the gap from its baseline", *r.Score, a.Score),
		Evidence: []string{keys.Result(r.RunID), "starter anchors show " + r.Task}}}
}

// quoted lists agent-chosen names each quoted (%q): a name with an
// escape code in it is shown, never played, on a reviewer's terminal.
func quoted(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}
