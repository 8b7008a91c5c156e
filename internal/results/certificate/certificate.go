// An agent definition's certificate: each check's verdict and evidence, kept under the definition's hash.

// Package certificate is an agent definition's certification as `starter
// certify` makes it (internal/process/certify) and everything after reads
// it: each check's verdict with its evidence, kept in the store under the
// definition's hash, shown by the agent list and the leaderboard, and
// carried in a run's record (so in its bundle).
package certificate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/keys"
)

// Status is a check's verdict.
type Status string

// Verdicts.
const (
	Pass          Status = "pass"
	Fail          Status = "fail"
	NotApplicable Status = "not_applicable"
)

// Check is one scenario's verdict, with what it was judged on: store
// keys, transcript call ids, the attempt log.
type Check struct {
	Name     string             `json:"name"`
	Status   Status             `json:"status"`
	Summary  string             `json:"summary"`
	Run      string             `json:"run,omitempty"`
	Evidence []string           `json:"evidence,omitempty"`
	Figures  map[string]float64 `json:"figures,omitempty"`
}

// Certificate is an agent definition's certification: kept in the store
// under its definition's hash, so a changed definition is uncertified.
type Certificate struct {
	Agent          string    `json:"agent"`
	DefinitionHash string    `json:"definition_hash"`
	Image          string    `json:"image,omitempty"`
	Task           string    `json:"task"`
	Runtime        string    `json:"runtime"`
	At             time.Time `json:"at"`
	Checks         []Check   `json:"checks"`
}

// Counts are how many checks passed, failed and did not apply.
func (c *Certificate) Counts() (pass, fail, na int) {
	for _, ch := range c.Checks {
		switch ch.Status {
		case Pass:
			pass++
		case Fail:
			fail++
		default:
			na++
		}
	}
	return pass, fail, na
}

// Passed: no check failed.
func (c *Certificate) Passed() bool {
	_, fail, _ := c.Counts()
	return fail == 0
}

// Line is the certificate in a word or two, as a list shows it.
func (c *Certificate) Line() string {
	pass, fail, na := c.Counts()
	var failed []string
	for _, ch := range c.Checks {
		if ch.Status == Fail {
			failed = append(failed, ch.Name)
		}
	}
	s := fmt.Sprintf("%d/%d passed", pass, pass+fail+na)
	if na > 0 {
		s += fmt.Sprintf(", %d n/a", na)
	}
	if fail > 0 {
		s += " (failed: " + strings.Join(failed, ", ") + ")"
	}
	return s
}

// Key is where a definition's certificate is kept.
func Key(definitionHash string) string {
	return keys.Certificate(definitionHash)
}

// Keep stores the certificate, replacing the definition's last.
func Keep(ctx context.Context, store blob.Store, c *Certificate) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the certificate: %w", err)
	}
	if err := store.Put(ctx, Key(c.DefinitionHash), bytes.NewReader(b)); err != nil {
		return fmt.Errorf("keep the certificate: %w", err)
	}
	return nil
}

// Load reads a definition's certificate (nil, nil: never certified).
func Load(ctx context.Context, store blob.Store, definitionHash string) (*Certificate, error) {
	b, err := blob.ReadAll(ctx, store, Key(definitionHash), 4<<20)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the certificate: %w", err)
	}
	var c Certificate
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("certificate %s: %w", Key(definitionHash), err)
	}
	return &c, nil
}

// Lines are each agent's certification as of now, by the definition its
// runs ran ("not certified" when none is kept; "definitions differ" for
// an agent whose runs ran several).
func Lines(ctx context.Context, store blob.Store, results []runs.Result) map[string]string {
	hashes := map[string]map[string]bool{}
	for _, r := range results {
		if r.AgentDef == nil || r.AgentDef.Hash == "" {
			continue
		}
		if hashes[r.Agent] == nil {
			hashes[r.Agent] = map[string]bool{}
		}
		hashes[r.Agent][r.AgentDef.Hash] = true
	}
	out := map[string]string{}
	for agent, hs := range hashes {
		if len(hs) > 1 {
			out[agent] = "definitions differ"
			continue
		}
		for h := range hs {
			out[agent] = "not certified"
			if c, err := Load(ctx, store, h); err == nil && c != nil {
				out[agent] = c.Line()
			}
		}
	}
	return out
}

// RecordKey is where a run's record keeps the certificate its agent's
// definition had when the run ended: its bundle carries it.
func RecordKey(runID string) string { return keys.RunCertificate(runID) }

// Record copies the definition's certificate into the run's record
// (none kept: nothing).
func Record(ctx context.Context, store blob.Store, runID, definitionHash string) error {
	c, err := Load(ctx, store, definitionHash)
	if err != nil || c == nil {
		return err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the certificate: %w", err)
	}
	if err := store.Put(ctx, RecordKey(runID), bytes.NewReader(b)); err != nil {
		return fmt.Errorf("record the certificate of %s: %w", runID, err)
	}
	return nil
}
