// Every key family of the store, one constructor each, and Families: the table the design page shows.

// Package keys builds every key of the store: one constructor per key
// family, so that a family's format is written once, and Families, the
// table docs/design/checkpoints.md shows (generated from it and checked).
// The owners of each family (checkpoint, transcript, observe, …) and GC
// build their keys here.
package keys

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"path"
	"strings"
	"time"
)

// Run is the folder of a run's blobs (its checkpoints, logs, results):
// the run id path-escaped, so that a benchmark's runs stay apart.
func Run(runID string) string { return "runs/" + url.PathEscape(runID) + "/" }

// Chunk is a checkpoint chunk, by its BLAKE3 hash, shared by every run.
func Chunk(hash string) string { return "chunks/" + hash[:2] + "/" + hash }

// Checkpoints is the folder of a run's manifests.
func Checkpoints(runID string) string { return Run(runID) + "checkpoints/" }

// Manifest is a run's checkpoint seq, written last: the commit.
func Manifest(runID string, seq int) string {
	return fmt.Sprintf("%s%08d.json", Checkpoints(runID), seq)
}

// Fences is the folder of a run's attempt fences.
func Fences(runID string) string { return Run(runID) + "fences/" }

// Fence is an attempt's fence: earlier attempts' commits refused.
func Fence(runID string, attempt int) string {
	return fmt.Sprintf("%s%08d.json", Fences(runID), attempt)
}

// Result is a run's result, completed.
func Result(runID string) string { return Run(runID) + "result.json" }

// RunCertificate is the certificate a run's agent held when it was stored.
func RunCertificate(runID string) string { return Run(runID) + "certificate.json" }

// Evaluations is the folder of a run's evaluations.
func Evaluations(runID string) string { return Run(runID) + "evaluations/" }

// Evaluation is a file of one evaluation (final-N-try-M, mark-S-try-M):
// its results file or its evaluator's log.
func Evaluation(runID, evaluation, name string) string {
	return Run(runID) + path.Join("evaluations", evaluation, path.Base(name))
}

// Logs is the folder of a run's agent logs; AttemptLogs an attempt's,
// shipped in segments named by their offset.
func Logs(runID string) string { return Run(runID) + "logs/" }

func AttemptLogs(runID string, attempt int) string {
	return fmt.Sprintf("%sattempt-%03d/", Logs(runID), attempt)
}

// Calls is the folder of a run's transcript.
func Calls(runID string) string { return Run(runID) + "calls/" }

// CallChunk is a body chunk of the transcript, by its hash.
func CallChunk(runID, hash string) string { return Calls(runID) + "chunks/" + hash[:2] + "/" + hash }

// CallAttempt is the folder of an attempt's records.
func CallAttempt(runID string, attempt int) string {
	return fmt.Sprintf("%sattempt-%03d/", Calls(runID), attempt)
}

// CallRecord is one record of the transcript.
func CallRecord(runID string, attempt, seq int) string {
	return fmt.Sprintf("%s%09d.json", CallAttempt(runID, attempt), seq)
}

// Observations is the folder of a run's observations; Observation an
// attempt's: processes, GPUs, experiments.
func Observations(runID string) string { return Run(runID) + "observe/" }

func Observation(runID string, attempt int) string {
	return Run(runID) + path.Join("observe", fmt.Sprintf("attempt-%04d.json", attempt))
}

// Policy is the sandbox an attempt ran in; Writes what it wrote outside
// its mounts.
func Policy(runID string, attempt int) string {
	return fmt.Sprintf("%ssandbox/attempt-%04d.json", Run(runID), attempt)
}

func Writes(runID string, attempt int) string {
	return fmt.Sprintf("%ssandbox/writes-%04d.json", Run(runID), attempt)
}

// Sessions is the folder of a person's attach sessions; Session one of
// them (asciicast v2).
func Sessions(runID string) string { return Run(runID) + "sessions/" }

func Session(runID, name string) string { return Sessions(runID) + name }

// Reviews is the folder of a run's verdicts; Review the one given at.
func Reviews(runID string) string { return Run(runID) + "review/" }

func Review(runID string, at time.Time) string {
	return fmt.Sprintf("%s%020d.json", Reviews(runID), at.UnixNano())
}

// BundleMeta is, only in a run bundle, the folder of its spec, agent,
// evaluator and envelope.
func BundleMeta(runID string) string { return Run(runID) + "bundle/" }

// Bundles is the folder of the log of a run's bundles; BundleEntry the
// one made at.
func Bundles(runID string) string { return Run(runID) + "bundles/" }

func BundleEntry(runID string, at time.Time) string {
	return fmt.Sprintf("%s%020d.json", Bundles(runID), at.UnixNano())
}

// Leaderboard is a benchmark's stored leaderboard in one format.
func Leaderboard(benchmarkID, format string) string {
	return "benchmarks/" + url.PathEscape(benchmarkID) + "/leaderboard." + format
}

// Plan is a benchmark's resume plan, one per resume.
func Plan(benchmarkID string, at time.Time) string {
	return fmt.Sprintf("benchmarks/%s/resume/%d.json", url.PathEscape(benchmarkID), at.UnixNano())
}

// Anchor is a task's measured anchor of role (baseline, top).
func Anchor(task, role string) string {
	return "anchors/" + url.PathEscape(task) + "/" + role + ".json"
}

// Controls is the folder of a task's controls; Control the one for an
// evaluator (its image digest and command), by its hash.
func Controls(task string) string { return "controls/" + task + "/" }

func Control(task, evaluator string) string {
	sum := sha256.Sum256([]byte(evaluator))
	return Controls(task) + hex.EncodeToString(sum[:8]) + ".json"
}

// Certificate is an agent definition's certificate, by its hash.
func Certificate(definitionHash string) string {
	return "certificates/" + strings.TrimPrefix(definitionHash, "sha256:") + ".json"
}

// Hosts is the fleet register's folder; Host a worker's record.
const Hosts = "hosts/"

func Host(id string) string { return Hosts + url.PathEscape(id) + ".json" }

// Prices and GPUPrices are the LLM and GPU price tables results name.
func Prices(sha string) string { return "prices/" + sha + ".json" }

func GPUPrices(sha string) string { return "prices/gpu/" + sha + ".json" }

// The locks of saves and GC, the store's clock and GC's generation.
const (
	GCGeneration = "gc/generation"
	Locks        = "locks/"
	SaveLocks    = Locks + "save-"
	GCLocks      = Locks + "gc-"
	ClockLocks   = Locks + "clock-"
)
