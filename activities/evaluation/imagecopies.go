// imageCopies: the scored model's weight files that the agent's image already held (review's weights_copied).

package evaluation

import (
	"context"
	"fmt"
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
// cannot be made (or not whole) is never the evaluation's failure; it
// says why (notCompared), which the result records: no copy found is
// then no evidence that none was made.
func (a *Evaluations) imageCopies(ctx context.Context, in activities.EvalInput, model string) (copies []runs.ImageCopy, notCompared string) {
	if in.AgentImage == "" {
		return nil, ""
	}
	log := a.Logger.With(zap.String("run", in.RunID), zap.String("image", in.AgentImage))
	whyNot := func(why string, err error) string {
		log.Warn("weights not compared with the agent's image", zap.String("why", why), zap.Error(err))
		return fmt.Sprintf("%s: %v", why, err)
	}
	files, skipped, err := weightFiles(model)
	if err != nil {
		return nil, whyNot("the model's weight files", err)
	}
	if len(files) == 0 {
		return nil, ""
	}
	bySize := map[int64][]string{}
	for rel, size := range files {
		bySize[size] = append(bySize[size], rel)
	}
	ctx, cancel := context.WithTimeout(ctx, compareBudget(ctx))
	defer cancel()
	image, err := a.imageHashes(ctx, in.AgentImage, bySize)
	if err != nil {
		return nil, whyNot("the agent's image "+in.AgentImage, err)
	}
	root, err := safefs.OpenDir(model)
	if err != nil {
		return nil, whyNot("the model dir", err)
	}
	defer func() { _ = root.Close() }()
	var failed []string
	for size, hashes := range image {
		for _, rel := range bySize[size] {
			h, err := hashIn(root, rel)
			if err != nil {
				failed = append(failed, whyNot(rel, err))
				continue
			}
			if p, ok := hashes[h]; ok {
				copies = append(copies, runs.ImageCopy{File: rel, Image: p, Size: size})
			}
		}
	}
	slices.SortFunc(copies, func(x, y runs.ImageCopy) int { return strings.Compare(x.File, y.File) })
	if skipped > 0 {
		failed = append(failed, fmt.Sprintf("%d weight files past the first %d were not compared", skipped, maxImageCopyFiles))
	}
	slices.Sort(failed)
	return copies, strings.Join(failed, "; ")
}

// compareBudget is how long the comparison may read: imageCopyTimeout,
// and never more than half of what is left of the activity, which still
// keeps the result.
func compareBudget(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return min(imageCopyTimeout, time.Until(dl)/2)
	}
	return imageCopyTimeout
}

// imageHashes hashes the files of the agent's image of a weight file's
// size: size -> hash -> path in the image.
func (a *Evaluations) imageHashes(ctx context.Context, image string, bySize map[int64][]string) (map[int64]map[string]string, error) {
	out := map[int64]map[string]string{}
	err := a.Sandbox.Workspace.ImageFiles(ctx, image, func(size int64) bool { return bySize[size] != nil },
		func(name string, size int64, r io.Reader) error {
			h, err := hashOf(r)
			if err != nil {
				return err
			}
			if out[size] == nil {
				out[size] = map[string]string{}
			}
			out[size][h] = name
			return nil
		})
	return out, err
}

// weightFiles are the regular files of the model dir worth comparing, by
// path under it, at most maxImageCopyFiles; skipped counts the rest.
func weightFiles(model string) (files map[string]int64, skipped int, err error) {
	root, err := safefs.OpenDir(model)
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = root.Close() }()
	files = map[string]int64{}
	err = root.Walk(func(e safefs.Entry) error {
		switch {
		case !e.Mode().IsRegular() || e.Stat.Size < minImageCopy:
		case len(files) < maxImageCopyFiles:
			files[e.Rel] = e.Stat.Size
		default:
			skipped++
		}
		return nil
	})
	return files, skipped, err
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
