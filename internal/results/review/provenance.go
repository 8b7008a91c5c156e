// Provenance of a run's weights: copies of the agent's image's files, and weights the door brought in (weights_copied, weights_downloaded).

package review

import (
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/mlrb/mlrb/internal/sandbox/observe"
	"github.com/mlrb/mlrb/internal/sandbox/transcript"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
	"github.com/mlrb/mlrb/internal/store/keys"
)

// imageCopied flags the model's weight files the worker found
// byte-identical to a file of the agent's image as it evaluated the
// model: a prebuilt model the image brought leaves no trace in the
// run's checkpoints.
func imageCopied(in Input) []Flag {
	var out []Flag
	for _, c := range in.Result.ImageCopies {
		out = append(out, Flag{Kind: WeightsCopied,
			What:     fmt.Sprintf("%q (%d bytes) is byte-identical to %q of the agent's image: the image brought it", path.Join(in.Result.ModelPath, c.File), c.Size, c.Image),
			Evidence: []string{blob.RunPrefix(in.Result.RunID) + "result.json (image_copies)", "agent image " + in.Result.AgentImage}})
	}
	if why := in.Result.ImageNotCompared; why != "" {
		out = append(out, Flag{Kind: WeightsNotCompared,
			What:     "the model's weights were not all compared with the agent's image (" + why + "): an image that brought them would not show",
			Evidence: []string{blob.RunPrefix(in.Result.RunID) + "result.json (image_not_compared)", "agent image " + in.Result.AgentImage}})
	}
	return out
}

// DownloadShare is how much of a model's weight bytes the door must have
// received before the model appeared for weights_downloaded: compressed,
// weights shrink by a third at most.
const DownloadShare = 0.5

// Downloads is what review reads of a transcript's connections, a record
// at a time: the bytes each brought in, and when it ended.
type Downloads struct {
	conns []download
}

type download struct {
	attempt int
	end     time.Time
	bytes   int64
}

// Add counts one record (a connection through the door; others pass).
func (d *Downloads) Add(c transcript.Call) {
	if c.Kind != transcript.KindConnect || c.Received <= 0 {
		return
	}
	d.conns = append(d.conns, download{attempt: c.Attempt, end: c.Start.Add(time.Duration(c.LatencyMS * float64(time.Millisecond))), bytes: c.Received})
}

// agentTime is wall time t of attempt a in the run's agent time.
func agentTime(obs []*observe.Observation, a int, t time.Time) (float64, bool) {
	for _, o := range obs {
		if o.Attempt == a {
			return o.StartAgentS + t.Sub(o.Start).Seconds(), true
		}
	}
	return 0, false
}

// downloaded flags a scored model that appeared whole, never changed,
// after the door had brought in at least DownloadShare of its weight
// bytes, with no work done between the last of those connections and
// its appearance: weights fetched and put in place, whether or not the
// download was deleted before any checkpoint saw it. A run that trains
// on what it downloaded (a base model fine-tuned) worked in between.
func downloaded(in Input) []Flag {
	if in.Final == nil || in.Result.ModelPath == "" || len(in.Downloads.conns) == 0 {
		return nil
	}
	dir := strings.TrimSuffix(path.Clean(in.Result.ModelPath), "/")
	var weights int64
	for _, f := range in.Final.Files {
		if f.Mode.IsRegular() && f.HardLink == "" && f.Size >= minCopied && strings.HasPrefix(f.Path, dir+"/") {
			weights += f.Size
		}
	}
	first, attempt, changed := appeared(in)
	c, ok := first[dir]
	if weights == 0 || !ok || changed[dir] {
		return nil
	}
	var got int64
	last := 0.0
	for _, d := range in.Downloads.conns {
		if at, ok := agentTime(in.Observations, d.attempt, d.end); ok && at <= c.AgentS {
			got += d.bytes
			last = max(last, at)
		}
	}
	w := newWork(in)
	if float64(got) < DownloadShare*float64(weights) || w.experimentIn(last, c.AgentS) || !w.idle(last, c.AgentS) {
		return nil
	}
	return []Flag{{Kind: WeightsDownloaded,
		What: fmt.Sprintf("model %q (%d weight bytes) appeared whole in checkpoint #%d at %.0f s of agent time, %.0f s after the door had brought in %d bytes, with no work between, and never changed",
			dir, weights, c.Seq, c.AgentS, c.AgentS-last, got),
		Evidence: []string{keys.Calls(in.Result.RunID), "starter calls " + in.Result.RunID, observe.Key(in.Result.RunID, attempt[dir]), checkpoint.ManifestKey(in.Result.RunID, c.Seq)}}}
}
