// The store's key families of checkpoints.

package checkpoint

import (
	"github.com/mlrb/mlrb/internal/store/keys"
)

// The engine's key families (chunks, manifests, fences, locks) are built
// in internal/store/keys with every other family of the store; the
// design page's table is generated from keys.Families.

func chunkKey(hash string) string { return ChunkKey(hash) }

// ChunkKey is where a chunk is stored, by its BLAKE3 hash: in a store, and
// in a run bundle laid out as one.
func ChunkKey(hash string) string { return keys.Chunk(hash) }

func runPrefix(runID string) string { return keys.Checkpoints(runID) }

// ManifestKey is the blob key of a run's checkpoint.
func ManifestKey(runID string, seq int) string {
	return keys.Manifest(runID, seq)
}

func fencePrefix(runID string) string { return keys.Fences(runID) }

func fenceKey(runID string, attempt int) string {
	return keys.Fence(runID, attempt)
}

// Locking: a save holds a shared lock object from its first chunk to its
// manifest; GC holds an exclusive one (gc.go).
const (
	// gcGenerationKey changes whenever a GC deletes chunks.
	gcGenerationKey = keys.GCGeneration
	lockPrefix      = keys.Locks
	saveLockPrefix  = keys.SaveLocks
	gcLockPrefix    = keys.GCLocks
)
