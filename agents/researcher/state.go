// Home is the agent's own directory in the workspace.

package researcher

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Home is the agent's own directory in the workspace: its state, its
// tools' full outputs and its jobs' logs, all inside what a checkpoint
// holds.
const Home = ".researcher"

// stateVersion is the state file's format; a newer one is refused, not
// misread.
const stateVersion = 1

// State is everything the agent needs to go on where it was: written
// after every step, so a checkpoint taken at any moment holds a state
// that was whole.
type State struct {
	Version int `json:"version"`
	// Model and API the conversation was held with.
	Model string `json:"model"`
	API   string `json:"api"`
	// System is the system prompt; Messages the conversation since the
	// last compaction, whose summary opens it.
	System   string    `json:"system"`
	Messages []Message `json:"messages"`
	Summary  string    `json:"summary,omitempty"`
	// Jobs are the background jobs started, by id.
	Jobs map[string]*Job `json:"jobs,omitempty"`
	// Counters of the whole run, over every attempt.
	Steps       int     `json:"steps"`
	Calls       int     `json:"calls"`
	Compactions int     `json:"compactions"`
	InputTokens int64   `json:"input_tokens"`
	OutTokens   int64   `json:"output_tokens"`
	CostUSD     float64 `json:"cost_usd"`
	// Context is the last request's size in tokens as the provider
	// reported it, and ContextBytes that request's size in bytes: the
	// rate the next request's size is estimated by.
	Context      int64 `json:"context_tokens"`
	ContextBytes int64 `json:"context_bytes"`
	// Submitted is the model directory last submitted ("": none yet);
	// Done: the agent said it had finished.
	Submitted string `json:"submitted,omitempty"`
	Done      bool   `json:"done,omitempty"`
	// Attempts are the attempts that ran this conversation, in order.
	Attempts []int `json:"attempts"`
	// LastNote is when the model was last told its time and budget.
	LastNote time.Time `json:"last_note"`
	// NextJob numbers jobs across attempts.
	NextJob int `json:"next_job"`
}

func statePath(workdir string) string { return filepath.Join(workdir, Home, "state.json") }

// LoadState reads the state a checkpoint restored (nil, nil: none).
func LoadState(workdir string) (*State, error) {
	b, err := os.ReadFile(statePath(workdir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the agent's state: %w", err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("the agent's state %s: %w", statePath(workdir), err)
	}
	if s.Version != stateVersion {
		return nil, fmt.Errorf("the agent's state %s is version %d; this agent reads %d", statePath(workdir), s.Version, stateVersion)
	}
	if s.Jobs == nil {
		s.Jobs = map[string]*Job{}
	}
	return &s, nil
}

// Save replaces the state file whole: written beside it, synced, then
// renamed over it, so a checkpoint or a crash sees the old or the new.
func (s *State) Save(workdir string) error {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode the agent's state: %w", err)
	}
	dir := filepath.Join(workdir, Home)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("the agent's home: %w", err)
	}
	f, err := os.CreateTemp(dir, ".state-*.tmp")
	if err != nil {
		return fmt.Errorf("write the agent's state: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, statePath(workdir))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write the agent's state: %w", err)
	}
	return nil
}
