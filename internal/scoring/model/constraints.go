package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mlrb/mlrb/internal/scoring/safetensors"
	"github.com/mlrb/mlrb/internal/store/safefs"
	"github.com/mlrb/mlrb/tasks"
)

// DefaultPeakContext is the context a peak-memory rule is measured over
// when the task names none: the edge competition's 2,048 tokens.
const DefaultPeakContext = 2048

// Check is what the worker found of a model against its task's rules.
type Check struct {
	Params int64
	// Violations are the rules the model breaks: it is disqualified.
	Violations []string
	// Flags are findings that do not disqualify it (an unmodified
	// reference model), shown beside its score.
	Flags []string
	// Metrics are the measured figures, under "constraints/<name>":
	// params, weight_bytes, peak_memory_bytes, compression_ratio.
	Metrics map[string]float64
	// peakViolation is the peak-memory rule's violation as computed from
	// config.json, which a measure on the GPU replaces.
	peakViolation string
}

func (c *Check) violate(format string, args ...any) {
	c.Violations = append(c.Violations, fmt.Sprintf(format, args...))
}

// violatePeak records the peak-memory rule's violation as computed.
func (c *Check) violatePeak(format string, args ...any) {
	c.violate(format, args...)
	c.peakViolation = c.Violations[len(c.Violations)-1]
}

// UseMeasuredPeak puts the evaluator's GPU measure of the peak memory
// (bytes over context tokens, on device) in place of the figure computed
// from config.json: the rule is judged on what the competition measured.
func (c *Check) UseMeasuredPeak(rules tasks.Constraints, bytes int64, context int, device string) {
	if rules.MaxPeakMemoryBytes <= 0 || bytes <= 0 {
		return
	}
	if i := slices.Index(c.Violations, c.peakViolation); c.peakViolation != "" && i >= 0 {
		c.Violations = slices.Delete(c.Violations, i, i+1)
	}
	c.Metrics["constraints/peak_memory_bytes_measured"] = float64(bytes)
	if bytes > rules.MaxPeakMemoryBytes {
		c.violate("a batch-1 forward pass over %d tokens took %d bytes of GPU memory as measured on %s, over the %d byte memory limit", context, bytes, device, rules.MaxPeakMemoryBytes)
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
			c.violate("%v", err)
		}
	}
	c.family(rules, arch)
	c.peak(rules, arch, s)
	c.reference(rules, s)
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
			c.violate("%s makes the loader load another model's weights (a PEFT adapter's base) than the ones checked: merge the adapter into the model and submit that", name)
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
		c.violate("config.json's auto_map names the model's own code: models are loaded without remote code; use a transformers architecture")
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
		c.violate("%d parameters exceed the limit of %d", params, rules.MaxParams)
	}
	if len(rules.AllowedDtypes) > 0 {
		names := make([]string, 0, len(dtypes))
		for d := range dtypes {
			names = append(names, d)
		}
		slices.Sort(names)
		for _, d := range names {
			if !slices.Contains(rules.AllowedDtypes, d) {
				c.violate("%d parameters are %s; allowed: %s", dtypes[d], d, strings.Join(rules.AllowedDtypes, ", "))
			}
		}
	}
	if rules.MaxModelBytes > 0 && bytes > rules.MaxModelBytes {
		c.violate("weights take %d bytes, over the %d byte memory limit", bytes, rules.MaxModelBytes)
	}
}

// family checks config.json's model_type against the approved families.
func (c *Check) family(rules tasks.Constraints, arch *Arch) {
	if len(rules.AllowedFamilies) == 0 {
		return
	}
	switch {
	case arch == nil:
		c.violate("no config.json: the model's family cannot be checked (allowed: %s)", strings.Join(rules.AllowedFamilies, ", "))
	case !slices.Contains(rules.AllowedFamilies, strings.ToLower(arch.ModelType)):
		c.violate("model_type %q is not an approved base-model family (allowed: %s)", arch.ModelType, strings.Join(rules.AllowedFamilies, ", "))
	}
}

// peak checks the memory of one forward pass; a model whose config.json
// does not say enough to compute it is not taken as fitting.
func (c *Check) peak(rules tasks.Constraints, arch *Arch, s *safetensors.Summary) {
	if rules.MaxPeakMemoryBytes <= 0 {
		return
	}
	context := rules.PeakContext
	if context <= 0 {
		context = DefaultPeakContext
	}
	if arch == nil {
		c.violatePeak("no config.json: the peak memory of a %d-token forward pass cannot be computed", context)
		return
	}
	elem := int64(2)
	if s.Params > 0 {
		elem = max(1, (s.Bytes+s.Params-1)/s.Params)
	}
	p, err := PeakMemory(arch, s.Bytes, elem, context)
	if err != nil {
		c.violatePeak("the peak memory of a %d-token forward pass cannot be computed: %v", context, err)
		return
	}
	c.Metrics["constraints/peak_memory_bytes"] = float64(p.Total())
	c.Metrics["constraints/kv_cache_bytes"] = float64(p.KVCache)
	if p.Total() > rules.MaxPeakMemoryBytes {
		c.violatePeak("a batch-1 forward pass over %d tokens needs %d bytes (weights %d, KV cache %d, activations %d), over the %d byte memory limit",
			context, p.Total(), p.Weights, p.KVCache, p.Activations, rules.MaxPeakMemoryBytes)
	}
}

// reference reports the compression against the model the task starts
// from, and flags that model itself.
func (c *Check) reference(rules tasks.Constraints, s *safetensors.Summary) {
	ref := rules.Reference
	if ref == nil {
		return
	}
	if s.Params > 0 && ref.Params > 0 {
		c.Metrics["constraints/compression_ratio"] = float64(ref.Params) / float64(s.Params)
	}
	if ref.ShapesSHA256 != "" && ShapeDigest(s.Tensors) == ref.ShapesSHA256 {
		c.Flags = append(c.Flags, fmt.Sprintf("unmodified %s: every tensor has its name and shape (nothing was pruned or restructured)", ref.Name))
	}
}
