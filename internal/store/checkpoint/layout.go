// The store's key families of checkpoints.

package checkpoint

import (
	"fmt"

	"github.com/mlrb/mlrb/internal/store/blob"
)

// The store's layout, every key family the engine writes:
//
//	chunks/<h[:2]>/<h>                    a chunk, zstd, named by its BLAKE3 hash
//	runs/<run>/checkpoints/<seq>.json     a checkpoint's manifest (written last: the commit)
//	runs/<run>/fences/<attempt>.json      an attempt's fence (fence.go)
//	locks/save-<id>.json, locks/gc-<id>.json, locks/clock-<id>
//	                                      save and GC locks, the store's clock (gc.go)
//	gc/generation                         changes whenever a GC deletes chunks
//
// Beside them, outside this package: runs/<run>/result.json and
// evaluations/ (internal/results/runresults, activities), runs/<run>/logs/
// (internal/store/logstore), runs/<run>/calls/ (internal/sandbox/transcript),
// runs/<run>/sandbox/ (activities/policy.go), runs/<run>/bundle/ (only in
// a run bundle: internal/store/bundle),
// hosts/<id>.json (internal/fleet/hosts), benchmarks/ (activities),
// prices/<sha256>.json (internal/run/llm). blob.RunPrefix names a run's folder for all of them.

func chunkKey(hash string) string { return ChunkKey(hash) }

// ChunkKey is where a chunk is stored, by its BLAKE3 hash: in a store, and
// in a run bundle laid out as one.
func ChunkKey(hash string) string { return "chunks/" + hash[:2] + "/" + hash }

func runPrefix(runID string) string { return blob.RunPrefix(runID) + "checkpoints/" }

// ManifestKey is the blob key of a run's checkpoint.
func ManifestKey(runID string, seq int) string {
	return fmt.Sprintf("%s%08d.json", runPrefix(runID), seq)
}

func fencePrefix(runID string) string { return blob.RunPrefix(runID) + "fences/" }

func fenceKey(runID string, attempt int) string {
	return fmt.Sprintf("%s%08d.json", fencePrefix(runID), attempt)
}

// Locking: a save holds a shared lock object from its first chunk to its
// manifest; GC holds an exclusive one (gc.go).
const (
	// gcGenerationKey changes whenever a GC deletes chunks.
	gcGenerationKey = "gc/generation"
	lockPrefix      = "locks/"
	saveLockPrefix  = lockPrefix + "save-"
	gcLockPrefix    = lockPrefix + "gc-"
)
