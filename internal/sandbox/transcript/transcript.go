// The transcript's records: calls and connections, and where they are kept.

// Package transcript keeps what an agent said to the world: every LLM
// call's request and response and every connection through its door,
// recorded in the blob store while the run goes, one record per call, so
// that a crash loses at most the call in flight. Bodies are cut into
// content-defined chunks, compressed and stored by hash under the run: a
// 24 h run sends its long prompt again with each call, and each repeat
// costs only the chunks that changed.
//
// Layout, under blob.RunPrefix(run):
//
//	calls/chunks/<h[:2]>/<h>            a body chunk, zstd, named by its BLAKE3 hash
//	calls/attempt-<n>/<seq>.json        a call's record, with its chunk list
package transcript

import (
	"encoding/json"
	"fmt"
	"path"
	"time"

	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/internal/store/keys"
)

// Kind is what a record is of.
type Kind string

// Record kinds.
const (
	KindLLM     Kind = "llm"     // an LLM API call
	KindConnect Kind = "connect" // a CONNECT through the door, let through or refused
)

// Body is a stored request or response body.
type Body struct {
	Bytes  int64    `json:"bytes"`
	Chunks []string `json:"chunks,omitempty"`
	// Truncated: the body was longer than what is kept of one (the
	// provider billed nothing for the call: its first MaxUnbilledBody
	// bytes; else MaxBody).
	Truncated bool `json:"truncated,omitempty"`
	// BLAKE3 is the whole body's hash (hex) as sent, where only its head
	// is kept: what the agent sent is named, not stored.
	BLAKE3 string `json:"blake3,omitempty"`
}

// Call is one record: an LLM call or a connection.
type Call struct {
	Seq     int       `json:"seq"`
	Attempt int       `json:"attempt"`
	Kind    Kind      `json:"kind"`
	Start   time.Time `json:"start"`
	// LatencyMS is the whole call; FirstByteMS the time to the first
	// byte of the answer (a stream's first event).
	LatencyMS   float64 `json:"latency_ms"`
	FirstByteMS float64 `json:"first_byte_ms,omitempty"`

	API    llm.API `json:"api,omitempty"`
	Model  string  `json:"model,omitempty"`
	Served string  `json:"served_model,omitempty"` // the model the provider says answered
	Stream bool    `json:"stream,omitempty"`
	Status int     `json:"status,omitempty"`
	// Error is why the gateway refused or failed the call ("" if it
	// reached the provider and came back).
	Error string `json:"error,omitempty"`
	// Usage is this call's share of the ledger, Raw the provider's own
	// usage objects.
	Usage       llm.Usage         `json:"usage"`
	Raw         []json.RawMessage `json:"raw_usage,omitempty"`
	RetryAfterS float64           `json:"retry_after_s,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
	Request     *Body             `json:"request,omitempty"`
	Response    *Body             `json:"response,omitempty"`

	// A connection's destination and bytes each way.
	Host     string `json:"host,omitempty"`
	Sent     int64  `json:"sent,omitempty"`
	Received int64  `json:"received,omitempty"`

	// Total is the attempt's ledger once this call was recorded: the
	// last record of an attempt gives its totals.
	Total llm.Ledger `json:"total"`
	// Unreadable marks a record read back that is not one (too large,
	// not JSON): the call is listed, saying so, and the rest stand.
	Unreadable bool `json:"unreadable,omitempty"`
	// BodiesDropped: the call's bodies were not kept (the recorder held
	// its most already).
	BodiesDropped bool `json:"bodies_dropped,omitempty"`
	// Count is how many calls and connections this record stands for,
	// where it sums many (429s, each second's, in one; 0: just itself).
	Count int `json:"count,omitempty"`
}

func runPrefix(runID string) string { return keys.Calls(runID) }

func chunkKey(runID, h string) string { return keys.CallChunk(runID, h) }

func attemptPrefix(runID string, attempt int) string {
	return keys.CallAttempt(runID, attempt)
}

func recordKey(runID string, attempt, seq int) string {
	return keys.CallRecord(runID, attempt, seq)
}

// parseKey reads a record key's attempt and seq.
func parseKey(key string) (attempt, seq int, ok bool) {
	dir, file := path.Split(key)
	if _, err := fmt.Sscanf(path.Base(dir), "attempt-%d", &attempt); err != nil {
		return 0, 0, false
	}
	if _, err := fmt.Sscanf(file, "%d.json", &seq); err != nil {
		return 0, 0, false
	}
	return attempt, seq, true
}
