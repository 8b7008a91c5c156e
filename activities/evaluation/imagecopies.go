// imageCopies: the scored model's weight files that the agent's image already held (review's weights_copied).

package evaluation

import (
	"context"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/zeebo/blake3"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/store/safefs"
)

// Bounds of the comparison: weight files from minImageCopy bytes (configs
// and tokenizers are everyone's), at most maxImageCopyFiles of them, and
// imageCopyTimeout for reading the image once.
const (
	minImageCopy      = 64 << 10
	maxImageCopyFiles = 10_000
	imageCopyTimeout  = 30 * time.Minute
)

// imageCopies names the model's weight files byte-identical to a file of
// the run's agent image: a prebuilt model the image brought and the agent
// put in place leaves no trace in the run's checkpoints, only here. Only
// image files of a weight file's size are hashed; the model is this
// worker's restored copy, read through descriptors. A comparison that
// cannot be made is logged, never the evaluation's failure.
func (a *Evaluations) imageCopies(ctx context.Context, in activities.EvalInput, model string) []runs.ImageCopy {
	if in.AgentImage == "" {
		return nil
	}
	log := a.Logger.With(zap.String("run", in.RunID), zap.String("image", in.AgentImage))
	files, err := weightFiles(model)
	if err != nil || len(files) == 0 {
		if err != nil {
			log.Warn("weights not compared with the agent's image", zap.Error(err))
		}
		return nil
	}
	bySize := map[int64][]string{}
	for rel, size := range files {
		bySize[size] = append(bySize[size], rel)
	}
	ctx, cancel := context.WithTimeout(ctx, imageCopyTimeout)
	defer cancel()
	image := map[int64]map[string]string{} // size -> hash -> image path
	err = a.Sandbox.Workspace.ImageFiles(ctx, in.AgentImage, func(size int64) bool { return bySize[size] != nil },
		func(name string, size int64, r io.Reader) error {
			h, err := hashOf(r)
			if err != nil {
				return err
			}
			if image[size] == nil {
				image[size] = map[string]string{}
			}
			image[size][h] = name
			return nil
		})
	if err != nil {
		log.Warn("weights not compared with the agent's image", zap.Error(err))
		return nil
	}
	root, err := safefs.OpenDir(model)
	if err != nil {
		log.Warn("weights not compared with the agent's image", zap.Error(err))
		return nil
	}
	defer func() { _ = root.Close() }()
	var out []runs.ImageCopy
	for size, hashes := range image {
		for _, rel := range bySize[size] {
			h, err := hashIn(root, rel)
			if err != nil {
				log.Warn("weights not compared with the agent's image", zap.String("file", rel), zap.Error(err))
				continue
			}
			if p, ok := hashes[h]; ok {
				out = append(out, runs.ImageCopy{File: rel, Image: p, Size: size})
			}
		}
	}
	slices.SortFunc(out, func(x, y runs.ImageCopy) int { return strings.Compare(x.File, y.File) })
	return out
}

// weightFiles are the regular files of the model dir worth comparing,
// by path under it.
func weightFiles(model string) (map[string]int64, error) {
	root, err := safefs.OpenDir(model)
	if err != nil {
		return nil, err
	}
	defer func() { _ = root.Close() }()
	out := map[string]int64{}
	err = root.Walk(func(e safefs.Entry) error {
		if e.Mode().IsRegular() && e.Stat.Size >= minImageCopy && len(out) < maxImageCopyFiles {
			out[e.Rel] = e.Stat.Size
		}
		return nil
	})
	return out, err
}

func hashIn(root *safefs.Dir, rel string) (string, error) {
	f, _, err := root.OpenPath(rel)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	return hashOf(f)
}

func hashOf(r io.Reader) (string, error) {
	h := blake3.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return string(h.Sum(nil)), nil
}
