// The worker's checks of a submitted model, by name.

package tasks

import (
	"fmt"
	"math"
	"strings"
)

// The worker's checks of a submitted model, by name: a violation names
// the check it broke (model.Check.Broken), and every check that applies
// to a task is stated in its brief (Disqualifiers), so no model is
// disqualified by a rule its agent was never told.
const (
	CheckWeights    = "weights"     // safetensors weights, no pickles, no links out
	CheckAdapter    = "adapter"     // no PEFT adapter: merged weights only
	CheckRemoteCode = "remote_code" // no auto_map: a transformers architecture
	CheckDtypes     = "dtypes"
	CheckParams     = "max_params"
	CheckBytes      = "max_model_bytes"
	CheckPeak       = "peak_memory"
	CheckContext    = "context" // the model takes the peak rule's context
	CheckFamily     = "family"
	CheckLineage    = "lineage"
	CheckUnmodified = "unmodified" // not the reference model itself
)

// Disqualifier is one check the worker makes of a task's model, as its
// brief states it.
type Disqualifier struct {
	Check string `json:"check"`
	Text  string `json:"text"`
}

// PeakContextOf is the context a peak-memory rule is measured over: the
// task's, else the edge competition kit's 2,000 tokens.
func (c Constraints) PeakContextOf() int {
	if c.PeakContext > 0 {
		return c.PeakContext
	}
	return 2000
}

// peakLoad says how the model is loaded for the peak-memory measure.
func (c Constraints) peakLoad() string {
	if c.PeakDtype == "" {
		return "in its saved dtype"
	}
	return "in " + c.PeakDtype + " whatever its saved dtype (as the competition's kit loaded it)"
}

// Disqualifiers are the checks the worker makes of the task's model,
// each in the words its brief gives it.
func (s *Spec) Disqualifiers() []Disqualifier {
	r := s.Constraints
	var out []Disqualifier
	add := func(check, format string, args ...any) {
		out = append(out, Disqualifier{Check: check, Text: fmt.Sprintf(format, args...)})
	}
	if s.Suite != "mini" {
		add(CheckWeights, "weights in safetensors files only (model.safetensors, or shards named by model.safetensors.index.json); pickled weights (.bin, .pt) and files linked from outside the model directory are refused")
		add(CheckAdapter, "merged weights only: a PEFT adapter (adapter_config.json, adapter_model.*) is disqualified, since the loader would read its base model's weights instead of the ones checked")
		add(CheckRemoteCode, "no custom code: a config.json with auto_map is disqualified (models load with trust_remote_code=False; use a transformers architecture)")
	}
	if len(r.AllowedDtypes) > 0 {
		add(CheckDtypes, "every tensor in %s (no quantized or other dtypes)", strings.Join(r.AllowedDtypes, ", "))
	}
	if r.MaxParams > 0 {
		add(CheckParams, "at most %d parameters", r.MaxParams)
	}
	if r.MaxModelBytes > 0 {
		add(CheckBytes, "weights of at most %d bytes", r.MaxModelBytes)
	}
	if r.MaxPeakMemoryBytes > 0 {
		ctx := r.PeakContextOf()
		add(CheckPeak, "a batch-1 forward pass over %d tokens, the model loaded %s, peaks at most at %d bytes of GPU memory (weights, KV cache and activations)", ctx, r.peakLoad(), r.MaxPeakMemoryBytes)
		add(CheckContext, "the model takes a %d-token input (config.json's max_position_embeddings, n_positions or n_ctx at least %d); one that cannot breaks the memory rule", ctx, ctx)
	}
	if len(r.AllowedFamilies) > 0 {
		add(CheckFamily, "config.json's model_type is one of %s", strings.Join(r.AllowedFamilies, ", "))
	}
	if l := r.Lineage; l != nil {
		names := make([]string, 0, len(l.From))
		for _, m := range l.From {
			names = append(names, m.Name)
		}
		switch l.Mode {
		case LineageSubset:
			add(CheckLineage, "the model comes from %s: every tensor is named as one of its tensors and no dimension is larger (pruned or sliced, never grown or replaced)", strings.Join(names, " or "))
		default:
			add(CheckLineage, "the model derives from the architecture of one of %s: every tensor, its layer number aside, is one of that architecture's with the same shape", strings.Join(names, ", "))
		}
	}
	if ref := r.Reference; ref != nil && ref.ShapesSHA256 != "" {
		add(CheckUnmodified, "not %s itself: a model with every tensor of %s under its name and shape is unmodified, and disqualified", ref.Name, ref.Name)
	}
	return out
}

// Brief is the part of every task's prompt that the spec writes itself:
// what disqualifies a model, the rules a reviewer holds the run to, and
// the data it may train on. RenderPrompt appends it to the template.
func (s *Spec) Brief() string {
	var b strings.Builder
	b.WriteString("\nWhat disqualifies the model (the worker checks each):\n")
	for _, d := range s.Disqualifiers() {
		fmt.Fprintf(&b, "- %s\n", d.Text)
	}
	if len(s.Constraints.Rules) > 0 {
		b.WriteString("Rules of the task (a reviewer holds the run to them):\n")
		for _, r := range s.Constraints.Rules {
			fmt.Fprintf(&b, "- %s\n", r)
		}
	}
	b.WriteString("Data and code you are given:\n")
	for _, d := range s.Datasets {
		fmt.Fprintf(&b, "- %s (%s)", d.Name, d.URI)
		if d.Notes != "" {
			fmt.Fprintf(&b, ": %s", d.Notes)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// Granularity is the least a rescore's tolerance may be: one item of
// the metric's smallest part, as a share of the score (0: no part
// states its items).
func (s *Spec) Granularity() float64 {
	g := 0.0
	n := float64(len(s.Metric.Parts))
	for _, p := range s.Metric.Parts {
		if p.Items > 0 {
			g = math.Max(g, 1/(float64(p.Items)*n))
		}
	}
	return g
}
