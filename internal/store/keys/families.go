// Families: the table of every key family, its pattern, what it holds, its constructor and who writes it.

package keys

import (
	"fmt"
	"strings"
)

// Family is one key family of the store.
type Family struct {
	Pattern, What, Built, Owner string
}

// Families is every key family, in the order the design page lists them.
var Families = []Family{
	{"chunks/<h[:2]>/<h>", "a checkpoint chunk, zstd, named by its BLAKE3 hash (shared by every run)", "Chunk", "internal/store/checkpoint"},
	{"runs/<run>/checkpoints/<seq>.json", "a checkpoint's manifest, written last: the commit", "Manifest", "internal/store/checkpoint"},
	{"runs/<run>/fences/<attempt>.json", "an attempt's fence: earlier attempts' commits refused", "Fence", "internal/store/checkpoint"},
	{"runs/<run>/result.json", "the run's result, completed (`runresults.Complete`)", "Result", "internal/results/runresults"},
	{"runs/<run>/certificate.json", "the certificate the run's agent held when the run was stored", "RunCertificate", "internal/results/certificate"},
	{"runs/<run>/evaluations/<evaluation>/…", "each evaluation's results file and evaluator log", "Evaluation", "activities"},
	{"runs/<run>/logs/attempt-<n>/<offset>.log", "the agent's log, shipped in segments", "AttemptLogs", "internal/store/logstore"},
	{"runs/<run>/calls/…", "the transcript: every LLM call and connection, bodies in chunks", "CallRecord, CallChunk", "internal/sandbox/transcript"},
	{"runs/<run>/observe/attempt-<n>.json", "an attempt's observation: processes, GPUs, experiments", "Observation", "internal/sandbox/observe"},
	{"runs/<run>/sandbox/attempt-<n>.json", "the sandbox each attempt ran in", "Policy", "activities"},
	{"runs/<run>/sandbox/writes-<n>.json", "what an attempt wrote outside its mounts", "Writes", "activities"},
	{"runs/<run>/sessions/<time>-<person>.cast", "a person's attach session, asciicast v2", "Session", "internal/sandbox/attach"},
	{"runs/<run>/review/<time>.json", "reviewers' verdicts, the latest the one that counts", "Review", "internal/results/review"},
	{"runs/<run>/bundles/<time>.json", "the log of the run's bundles: which is the latest", "BundleEntry", "internal/store/bundle"},
	{"runs/<run>/bundle/…", "only in a run bundle: spec, agent, evaluator, envelope", "BundleMeta", "internal/store/bundle"},
	{"benchmarks/<id>/leaderboard.{json,csv,md,svg}", "a benchmark's stored leaderboard", "Leaderboard", "activities"},
	{"benchmarks/<id>/resume/<time>.json", "a resume's plan", "Plan", "activities"},
	{"anchors/<task>/<role>.json", "a measured anchor", "Anchor", "internal/results/anchors"},
	{"controls/<task>/<evaluator>.json", "a task's control model for an evaluator", "Control", "activities"},
	{"certificates/<definition>.json", "an agent definition's certificate", "Certificate", "internal/results/certificate"},
	{"hosts/<id>.json", "a worker's host record", "Host", "internal/fleet/hosts"},
	{"prices/<sha256>.json, prices/gpu/<sha256>.json", "the LLM and GPU price tables results name", "Prices, GPUPrices", "internal/process/app"},
	{"locks/…, gc/generation", "save and GC locks, the store's clock, the GC generation", "SaveLocks, GCLocks, ClockLocks, GCGeneration", "internal/store/checkpoint"},
}

// Markdown is the design page's table of Families.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| key | what | built by | written by |\n|---|---|---|---|\n")
	for _, f := range Families {
		var built []string
		for _, c := range strings.Split(f.Built, ", ") {
			built = append(built, "`keys."+c+"`")
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | `%s` |\n", f.Pattern, f.What, strings.Join(built, ", "), f.Owner)
	}
	return b.String()
}
