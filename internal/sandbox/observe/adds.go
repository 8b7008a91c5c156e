// What a checkpoint added over the one before: model dirs among them.

package observe

import (
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/mlrb/mlrb/internal/store/checkpoint"
)

// Adds is what checkpoint next holds that prev (nil: none) did not: the
// model directories (a config.json beside weights) with a file new or
// changed, the code files changed elsewhere, and the bytes logs grew.
// Only the manifests are read, never the agent's files. Model paths are
// from the agent's work dir when they are under it.
func Adds(prev, next *checkpoint.Manifest) CheckpointAdds {
	a := CheckpointAdds{Seq: next.Seq, At: next.CreatedAt, AgentS: next.AgentSeconds}
	before := map[string]checkpoint.File{}
	if prev != nil {
		for _, f := range prev.Files {
			before[f.Path] = f
		}
	}
	models := modelDirs(next.Files)
	changedModel := map[string]bool{}
	for _, f := range next.Files {
		if !f.Mode.IsRegular() {
			continue
		}
		old, had := before[f.Path]
		if had && old.Size == f.Size && slices.Equal(old.Chunks, f.Chunks) && old.HardLink == f.HardLink {
			continue
		}
		dir := path.Dir(f.Path)
		switch {
		case models[dir] && isWeights(path.Base(f.Path)):
			// Its weights changed: a config touched later is no training.
			changedModel[dir] = true
		case models[dir]:
		case isLog(f.Path):
			if grew := f.Size - old.Size; grew > 0 {
				a.LogsGrew += grew
			}
		case isCode(f.Path):
			a.CodeChanged++
		}
	}
	for d := range changedModel {
		// Named as the agent names it: from its work dir, as in
		// submission.json.
		if rel, ok := strings.CutPrefix(d, next.Workdir+"/"); ok && next.Workdir != "" {
			d = rel
		}
		a.Models = append(a.Models, d)
	}
	slices.Sort(a.Models)
	return a
}

// modelDirs are the directories holding a config.json and weights.
func modelDirs(files []checkpoint.File) map[string]bool {
	config, weights := map[string]bool{}, map[string]bool{}
	for _, f := range files {
		dir, name := path.Split(f.Path)
		dir = strings.TrimSuffix(dir, "/")
		if dir == "" {
			dir = "."
		}
		switch {
		case name == "config.json":
			config[dir] = true
		case isWeights(name):
			weights[dir] = true
		}
	}
	out := map[string]bool{}
	for d := range config {
		if weights[d] {
			out[d] = true
		}
	}
	return out
}

func isWeights(name string) bool {
	for _, ext := range []string{".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".h5", ".msgpack"} {
		if strings.HasSuffix(name, ext) {
			return true
		}
	}
	// The mini tasks' models keep their weights as JSON.
	return name == "model.json"
}

func isLog(p string) bool {
	base := path.Base(p)
	return strings.HasSuffix(base, ".log") || strings.HasSuffix(base, ".out") || strings.HasSuffix(base, ".err") ||
		strings.Contains("/"+p, "/logs/") || strings.Contains("/"+p, "/wandb/")
}

func isCode(p string) bool {
	switch path.Ext(p) {
	case ".py", ".sh", ".ipynb", ".yaml", ".yml", ".toml", ".cfg", ".c", ".cc", ".cpp", ".h", ".cu", ".rs", ".go", ".lean", ".js", ".ts", ".jl", ".r", ".R":
		return true
	}
	return false
}

// nextModel is the model the first checkpoint after end added, if any,
// scored as the first scored checkpoint that still holds it (none of
// adds, all the run's checkpoints in order, added another model since).
func nextModel(o *Observation, end time.Time, adds []CheckpointAdds, scores map[int]Scored) *ModelRef {
	for _, c := range o.Checkpoints {
		if c.At.Before(end) {
			continue
		}
		if len(c.Models) == 0 {
			return nil
		}
		m := &ModelRef{Checkpoint: c.Seq, Path: c.Models[0]}
		for _, later := range adds {
			if later.Seq < c.Seq {
				continue
			}
			if later.Seq > c.Seq && len(later.Models) > 0 {
				break
			}
			if s, ok := scores[later.Seq]; ok {
				m.Score, m.Split = &s.Score, s.Split
				break
			}
		}
		return m
	}
	return nil
}

// allAdds are every observed checkpoint's additions, in sequence order;
// a scored checkpoint no observation saw (its attempt's observation
// lost) counts as adding nothing.
func allAdds(obs []*Observation, scores map[int]Scored) []CheckpointAdds {
	var adds []CheckpointAdds
	seen := map[int]bool{}
	for _, o := range obs {
		for _, c := range o.Checkpoints {
			adds = append(adds, c)
			seen[c.Seq] = true
		}
	}
	for seq := range scores {
		if !seen[seq] {
			adds = append(adds, CheckpointAdds{Seq: seq})
		}
	}
	sort.Slice(adds, func(i, j int) bool { return adds[i].Seq < adds[j].Seq })
	return adds
}
