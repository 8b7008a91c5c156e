// A run bundle's statement: in-toto over DSSE, its files and their hashes.

// Package bundle turns a run's stored record into evidence a third party
// can check without the operator's store, server or network: a directory
// laid out as a blob store (so the checkpoint engine restores the scored
// model from it as from any store), with an in-toto Statement (v1) naming
// every file by SHA-256, signed in a DSSE envelope with the operator's
// ed25519 key. DSSE comes from github.com/secure-systems-lab/go-securesystemslib
// (dsse), the Statement from github.com/in-toto/attestation (go/v1).
//
// Layout of a bundle directory (a benchmark's runs share its chunks):
//
//	chunks/<h[:2]>/<h>                    the checkpoints' chunks, as stored (zstd, BLAKE3-named)
//	runs/<run>/result.json                the stored result; beside it what the store kept of the run:
//	runs/<run>/checkpoints/<seq>.json     the final checkpoint's manifest (and each mark's, with --marks)
//	runs/<run>/evaluations/, calls/, observe/, logs/, sandbox/, fences/
//	runs/<run>/bundle/task.json           the task spec the run ran (its hash in the statement)
//	runs/<run>/bundle/agent.json          the agent definition and image digest
//	runs/<run>/bundle/evaluator.json      the evaluator's identity
//	runs/<run>/bundle/signer.pub          the signing key's public half (not trusted by verify)
//	runs/<run>/bundle/envelope.json       the DSSE envelope over the statement
package bundle

import (
	"context"
	"encoding/json"
	"fmt"
	"path"

	ita "github.com/in-toto/attestation/go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mlrb/mlrb/internal/store/keys"
)

// PayloadType is the DSSE payload type of an in-toto statement.
const PayloadType = "application/vnd.in-toto+json"

// PredicateType names what the statement's predicate is: an mlrb run's
// record as its operator's store held it.
const PredicateType = "https://github.com/mlrb/mlrb/run-bundle/v1"

// Names of the files a bundle adds to a run's stored record.
const (
	TaskFile      = "task.json"
	AgentFile     = "agent.json"
	EvaluatorFile = "evaluator.json"
	SignerFile    = "signer.pub"
	EnvelopeFile  = "envelope.json"
)

// MetaDir is where a run's bundle files lie in the bundle directory.
func MetaDir(runID string) string { return keys.BundleMeta(runID) }

// EnvelopeKey is the run's envelope in the bundle directory.
func EnvelopeKey(runID string) string { return path.Join(MetaDir(runID), EnvelopeFile) }

// Predicate is what the statement says of the run besides its files.
type Predicate struct {
	RunID     string `json:"run_id"`
	Benchmark string `json:"benchmark_id,omitempty"`
	Task      string `json:"task"`
	SpecHash  string `json:"spec_hash"`
	Agent     string `json:"agent"`
	Seed      int64  `json:"seed"`
	// AgentImage is the agent's image digest (or built-in binary's hash).
	AgentImage string `json:"agent_image,omitempty"`
	// Evaluator is the evaluator that scored the final model: an image
	// digest, or the reference evaluator's scoring code by name.
	Evaluator string `json:"evaluator,omitempty"`
	// Final and Marks are the checkpoints bundled: the scored one, and
	// the curve's when asked for.
	Final int   `json:"final_checkpoint"`
	Marks []int `json:"mark_checkpoints,omitempty"`
	// Store is where the operator's store held the run.
	Store     string `json:"store"`
	BundledAt string `json:"bundled_at"`
	// Verdict is the latest of the run's verdicts the bundle holds (its
	// file under review/; "": none), and WithSessions whether a person's
	// recordings and notes are in it.
	Verdict      string `json:"latest_verdict,omitempty"`
	WithSessions bool   `json:"with_sessions,omitempty"`
	// Result is the stored result, as stored.
	Result json.RawMessage `json:"result"`
}

// Subject is one file of the bundle: its path in the bundle directory,
// its SHA-256 (hex) and its size (-1 where a bundle made before sizes
// were signed does not say).
type Subject struct {
	Name   string
	SHA256 string
	Size   int64
}

// sizeAnnotation names a subject's signed size in its annotations.
const sizeAnnotation = "mlrb.size"

// statement is the in-toto Statement over subjects and p, as JSON.
func statement(subjects []Subject, p *Predicate) ([]byte, error) {
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode predicate: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("encode predicate: %w", err)
	}
	pred, err := structpb.NewStruct(m)
	if err != nil {
		return nil, fmt.Errorf("encode predicate: %w", err)
	}
	st := &ita.Statement{Type: ita.StatementTypeUri, PredicateType: PredicateType, Predicate: pred}
	for _, s := range subjects {
		// The size is signed too: verify stats a file against it before
		// reading a byte (a sparse file of terabytes is refused at once).
		size, err := structpb.NewStruct(map[string]any{sizeAnnotation: s.Size})
		if err != nil {
			return nil, fmt.Errorf("encode subject %s: %w", s.Name, err)
		}
		st.Subject = append(st.Subject, &ita.ResourceDescriptor{Name: s.Name, Digest: map[string]string{"sha256": s.SHA256}, Annotations: size})
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("statement: %w", err)
	}
	b, err := protojson.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("encode statement: %w", err)
	}
	return b, nil
}

// sign wraps the statement in a DSSE envelope signed by s.
func sign(ctx context.Context, s dsse.Signer, stmt []byte) ([]byte, error) {
	es, err := dsse.NewEnvelopeSigner(s)
	if err != nil {
		return nil, fmt.Errorf("envelope signer: %w", err)
	}
	env, err := es.SignPayload(ctx, PayloadType, stmt)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	b, err := json.MarshalIndent(env, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode envelope: %w", err)
	}
	return b, nil
}
