// The resume note: its file and what it says.

package contract

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// EnvResumeFile names the resume note's file: set for a resumed attempt
// only (MLRB_RESUMED=1), in the control dir beside the deadline.
const (
	EnvResumeFile = "MLRB_RESUME_FILE"
	ResumeFile    = "resume.json" // in the control dir
)

// ResumeNote is what a resumed attempt is told of the loss it resumes
// after, from what the worker recorded (the checkpoint restored, the
// last attempt's observation): an agent that keeps its reasoning in its
// workspace knows from it what was done, what was lost, and what was
// running when the last attempt died.
type ResumeNote struct {
	// Attempt is this attempt; LastAttempt the one before it (0 where
	// the worker kept no observation of it).
	Attempt     int `json:"attempt"`
	LastAttempt int `json:"last_attempt,omitempty"`
	// LastEnded is how the last attempt ended, as the worker recorded it
	// (its agent's exit, handed_back), or "lost" when its worker was.
	LastEnded string `json:"last_ended,omitempty"`
	// Checkpoint is what the workspace was restored from.
	Checkpoint ResumedCheckpoint `json:"checkpoint"`
	// LastSeen is the last attempt's last sample the worker stored (at
	// a checkpoint, at most observe's store interval, 10 minutes, before
	// the loss); DownS how long the run was down, from then or the
	// checkpoint, whichever is later, to this attempt's start.
	LastSeen time.Time `json:"last_seen,omitempty"`
	DownS    float64   `json:"down_s"`
	// LostAgentS is the agent time the run has lost in all to its
	// attempts' losses: work done past their checkpoints, to do again.
	LostAgentS float64 `json:"lost_agent_s"`
	// Running are the agent's processes alive at LastSeen, oldest first:
	// what was in flight when the last attempt died.
	Running []ResumedProcess `json:"running,omitempty"`
}

// ResumedCheckpoint names a checkpoint restored.
type ResumedCheckpoint struct {
	Seq     int       `json:"seq"`
	Attempt int       `json:"attempt"`
	AgentS  float64   `json:"agent_s"`
	At      time.Time `json:"created_at"`
}

// ResumedProcess is one process of the last attempt, as last seen.
type ResumedProcess struct {
	PID     int    `json:"pid"`
	Command string `json:"command"`
	// StartAgentS is when it started, in the run's agent time; Root: the
	// agent's own first process.
	StartAgentS float64 `json:"start_agent_s"`
	Root        bool    `json:"root,omitempty"`
}

// MaxResumeNote bounds a note read back (its commands are capped).
const MaxResumeNote = 4 << 20

// WriteResumeNote writes n in the control dir.
func WriteResumeNote(dir string, n ResumeNote) error {
	b, err := json.MarshalIndent(n, "", "  ")
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, ResumeFile), append(b, '\n'), 0o644)
	}
	if err != nil {
		return fmt.Errorf("resume note: %w", err)
	}
	return nil
}

// ReadResumeNote reads the note at path.
func ReadResumeNote(path string) (ResumeNote, error) {
	var n ResumeNote
	f, err := os.Open(path)
	if err != nil {
		return n, fmt.Errorf("resume note: %w", err)
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, MaxResumeNote+1))
	if err == nil && len(b) > MaxResumeNote {
		err = fmt.Errorf("over %d bytes", MaxResumeNote)
	}
	if err == nil {
		err = json.Unmarshal(b, &n)
	}
	if err != nil {
		return n, fmt.Errorf("resume note %s: %w", path, err)
	}
	return n, nil
}
