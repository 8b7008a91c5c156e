// Check is what the worker found of a model against its task's rules.

package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mlrb/mlrb/internal/scoring/lmeval"
	"github.com/mlrb/mlrb/internal/scoring/safetensors"
	"github.com/mlrb/mlrb/internal/store/safefs"
	"github.com/mlrb/mlrb/tasks"
)

// Check is what the worker found of a model against its task's rules.
type Check struct {
	Params int64
	// Violations are the rules the model breaks: it is disqualified.
	// Broken names the check of each (tasks.Check*), in the same order.
	Violations []string
	Broken     []string
	// Flags are findings that do not disqualify it, shown beside its
	// score and on the board.
	Flags []string
	// Metrics are the measured figures, under "constraints/<name>":
	// params, weight_bytes, peak_memory_bytes, compression_ratio.
	Metrics map[string]float64
	// peakViolation is the peak-memory rule's violation as computed from
	// config.json, which a measure on the GPU replaces.
	peakViolation string
}

func (c *Check) violate(check, format string, args ...any) {
	c.Violations = append(c.Violations, fmt.Sprintf(format, args...))
	c.Broken = append(c.Broken, check)
}

// violatePeak records the peak-memory rule's violation as computed.
func (c *Check) violatePeak(format string, args ...any) {
	c.violate(tasks.CheckPeak, format, args...)
	c.peakViolation = c.Violations[len(c.Violations)-1]
}

// UseMeasuredPeak puts the evaluator's GPU measure of the peak memory
// (m: bytes over its context tokens, loaded in its dtype, on its device)
// in place of the figure computed from config.json: the rule is judged
// on what the competition measured. A measure over another context or
// dtype than the rule's is not the rule's, and is left out.
func (c *Check) UseMeasuredPeak(rules tasks.Constraints, m lmeval.Measured) {
	want := rules.PeakDtype
	if want == "" {
		want = "saved"
	}
	if rules.MaxPeakMemoryBytes <= 0 || m.PeakMemoryBytes <= 0 || m.PeakContext != rules.PeakContextOf() || m.Dtype != want {
		return
	}
	bytes, context, device := m.PeakMemoryBytes, m.PeakContext, m.Device
	if i := slices.Index(c.Violations, c.peakViolation); c.peakViolation != "" && i >= 0 {
		c.Violations = slices.Delete(c.Violations, i, i+1)
		c.Broken = slices.Delete(c.Broken, i, i+1)
	}
	c.Metrics["constraints/peak_memory_bytes_measured"] = float64(bytes)
	if bytes > rules.MaxPeakMemoryBytes {
		c.violate(tasks.CheckPeak, "a batch-1 forward pass over %d tokens took %d bytes of GPU memory as measured on %s, over the %d byte memory limit", context, bytes, device, rules.MaxPeakMemoryBytes)
	}
}

// CheckConstraints reads the model's size, dtypes and tensors from the
// weights the loader will load (safetensors.Summarise: model.safetensors
// or the index's shards, nothing beside them) and its architecture from
// its config.json, and lists every rule of the task it breaks. Only a
// mini-suite model, which has no weights files (the reference agent's
// JSON n-grams), is described by its config.json alone; a full task's
// model is never taken at its config's word. A model that cannot be
// loaded safely (pickled or linked weights, none at all, a broken
// header) is refused with the reason: nothing of it is evaluated.
func CheckConstraints(model string, spec *tasks.Spec) (*Check, error) {
	s, err := safetensors.Summarise(model)
	switch {
	case errors.Is(err, safetensors.ErrNoFiles) && spec.Suite == "mini":
		return miniCheck(model, spec)
	case err != nil:
		return nil, fmt.Errorf("model weights: %w", err)
	}
	c := &Check{Params: s.Params, Metrics: map[string]float64{"constraints/params": float64(s.Params), "constraints/weight_bytes": float64(s.Bytes)}}
	rules := spec.Constraints
	c.sizeAndDtypes(rules, s.Params, s.Bytes, s.DTypes)
	var arch *Arch
	if b, err := safefs.ReadFile(model, "config.json", MaxReport); err == nil {
		arch, err = ParseArch(b)
		if err != nil {
			c.violate(tasks.CheckWeights, "%v", err)
		}
	}
	c.family(rules, arch)
	c.peak(rules, arch, s)
	c.reference(rules, s)
	c.lineage(rules, s)
	c.loadsMore(model)
	return c, nil
}

// redirects are files that make a loader read more than the weights
// checked: a PEFT adapter loads its base model from wherever its config
// says (transformers does, with peft installed), and config.json's
// auto_map runs the model's own code.
var redirects = []string{"adapter_config.json", "adapter_model.safetensors", "adapter_model.bin"}

// loadsMore flags what would make the evaluator load weights or code the
// check never read: each is a violation of the task's rules.
func (c *Check) loadsMore(model string) {
	for _, name := range redirects {
		if _, err := os.Lstat(filepath.Join(model, name)); err == nil {
			c.violate(tasks.CheckAdapter, "%s makes the loader load another model's weights (a PEFT adapter's base) than the ones checked: merge the adapter into the model and submit that", name)
		}
	}
	b, err := safefs.ReadFile(model, "config.json", MaxReport)
	if err != nil {
		return
	}
	var cfg map[string]json.RawMessage
	if json.Unmarshal(b, &cfg) != nil {
		return
	}
	if _, ok := cfg["auto_map"]; ok {
		c.violate(tasks.CheckRemoteCode, "config.json's auto_map names the model's own code: models are loaded without remote code; use a transformers architecture")
	}
}

// miniCheck describes a mini task's model by its config.json.
func miniCheck(model string, spec *tasks.Spec) (*Check, error) {
	var cfg struct {
		NumParameters int64  `json:"num_parameters"`
		TorchDtype    string `json:"torch_dtype"`
	}
	b, err := safefs.ReadFile(model, "config.json", MaxReport)
	if err != nil {
		return nil, fmt.Errorf("model config.json: %w", err)
	}
	_ = json.Unmarshal(b, &cfg)
	dtypes := map[string]int64{}
	if cfg.TorchDtype != "" {
		dtypes[cfg.TorchDtype] = cfg.NumParameters
	}
	bytes := dirBytes(model)
	c := &Check{Params: cfg.NumParameters, Metrics: map[string]float64{"constraints/params": float64(cfg.NumParameters), "constraints/weight_bytes": float64(bytes)}}
	c.sizeAndDtypes(spec.Constraints, cfg.NumParameters, bytes, dtypes)
	return c, nil
}

func (c *Check) sizeAndDtypes(rules tasks.Constraints, params, bytes int64, dtypes map[string]int64) {
	if rules.MaxParams > 0 && params > rules.MaxParams {
		c.violate(tasks.CheckParams, "%d parameters exceed the limit of %d", params, rules.MaxParams)
	}
	if len(rules.AllowedDtypes) > 0 {
		names := make([]string, 0, len(dtypes))
		for d := range dtypes {
			names = append(names, d)
		}
		slices.Sort(names)
		for _, d := range names {
			if !slices.Contains(rules.AllowedDtypes, d) {
				c.violate(tasks.CheckDtypes, "%d parameters are %s; allowed: %s", dtypes[d], d, strings.Join(rules.AllowedDtypes, ", "))
			}
		}
	}
	if rules.MaxModelBytes > 0 && bytes > rules.MaxModelBytes {
		c.violate(tasks.CheckBytes, "weights take %d bytes, over the %d byte memory limit", bytes, rules.MaxModelBytes)
	}
}

// family checks config.json's model_type against the approved families.
func (c *Check) family(rules tasks.Constraints, arch *Arch) {
	if len(rules.AllowedFamilies) == 0 {
		return
	}
	switch {
	case arch == nil:
		c.violate(tasks.CheckFamily, "no config.json: the model's family cannot be checked (allowed: %s)", strings.Join(rules.AllowedFamilies, ", "))
	case !slices.Contains(rules.AllowedFamilies, strings.ToLower(arch.ModelType)):
		c.violate(tasks.CheckFamily, "model_type %q is not an approved base-model family (allowed: %s)", arch.ModelType, strings.Join(rules.AllowedFamilies, ", "))
	}
}

// peak checks the memory of one forward pass over the rule's context,
// the model loaded in the rule's dtype (else its saved one). A model
// whose config.json does not say enough to compute it is not taken as
// fitting, and one that cannot take the context breaks the rule.
func (c *Check) peak(rules tasks.Constraints, arch *Arch, s *safetensors.Summary) {
	if rules.MaxPeakMemoryBytes <= 0 {
		return
	}
	context := rules.PeakContextOf()
	if arch == nil {
		c.violatePeak("no config.json: the peak memory of a %d-token forward pass cannot be computed", context)
		return
	}
	if arch.MaxPositions > 0 && arch.MaxPositions < int64(context) {
		c.violate(tasks.CheckContext, "the model takes at most %d positions (config.json's %s), fewer than the %d tokens the memory rule is measured over", arch.MaxPositions, arch.PositionsKey, context)
		return
	}
	weights, elem := s.Bytes, int64(2)
	if s.Params > 0 {
		elem = max(1, (s.Bytes+s.Params-1)/s.Params)
	}
	if e, ok := dtypeBytes[rules.PeakDtype]; ok {
		// Loaded in the rule's dtype: every parameter takes its size.
		weights, elem = s.Params*e, e
	}
	p, err := PeakMemory(arch, weights, elem, context)
	if err != nil {
		c.violatePeak("the peak memory of a %d-token forward pass cannot be computed: %v", context, err)
		return
	}
	c.Metrics["constraints/peak_memory_bytes"] = float64(p.Total())
	c.Metrics["constraints/kv_cache_bytes"] = float64(p.KVCache)
	if p.Total() > rules.MaxPeakMemoryBytes {
		c.violatePeak("a batch-1 forward pass over %d tokens, loaded %s, needs %d bytes (weights %d, KV cache %d, activations %d), over the %d byte memory limit",
			context, loadedAs(rules.PeakDtype), p.Total(), p.Weights, p.KVCache, p.Activations, rules.MaxPeakMemoryBytes)
	}
}

// dtypeBytes are the sizes of the dtypes a rule may load a model in.
var dtypeBytes = map[string]int64{"float32": 4, "float16": 2, "bfloat16": 2}

func loadedAs(dtype string) string {
	if dtype == "" {
		return "in its saved dtype"
	}
	return "in " + dtype
}

// reference reports the compression against the model the task starts
// from; that model itself breaks the rules.
func (c *Check) reference(rules tasks.Constraints, s *safetensors.Summary) {
	ref := rules.Reference
	if ref == nil {
		return
	}
	if s.Params > 0 && ref.Params > 0 {
		c.Metrics["constraints/compression_ratio"] = float64(ref.Params) / float64(s.Params)
	}
	if ref.ShapesSHA256 != "" && ShapeDigest(s.Tensors) == ref.ShapesSHA256 {
		c.violate(tasks.CheckUnmodified, "unmodified %s: every tensor has its name and shape (nothing was pruned or restructured)", ref.Name)
	}
}
