// systemPrompt is the agent's standing instructions.

package researcher

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/mlrb/mlrb/internal/run/contract"
)

// systemPrompt is the agent's standing instructions: the harness's, then
// the task's brief as the worker wrote it (MLRB_PROMPT_FILE).
func (a *Agent) systemPrompt() (string, error) {
	var brief string
	if p := a.Env.PromptFile; p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			return "", fmt.Errorf("%s: %w", contract.EnvPromptFile, err)
		}
		brief = string(b)
	} else {
		brief = fmt.Sprintf("Task %s.", a.Env.Task)
	}
	return fmt.Sprintf(`You are an ML research agent working alone on a research task, with tools that act in your work dir (%s).
Work as a researcher: read the task's files, form a baseline, run experiments, keep notes in the work dir, and improve on your best result.
Rules of the harness:
- Save models under %s and submit one with the submit tool as soon as you have one; submit again whenever a better one is ready. Only the last submission is evaluated. Call submit with done=true when you are finished.
- Use job_start for anything that takes more than a few minutes, and job_check to wait for it.
- The deadline is in the file %s (it may be extended); you will be told the time left and the LLM budget used. At the deadline the harness stops you, and the last submission stands.
- Everything in the work dir survives a crash of the machine: you may be resumed from a checkpoint with this conversation, and told what was lost.

The task (%s):
%s`, a.Env.Workdir, a.Env.OutputDir(), a.Env.DeadlineFile, a.Env.Task, brief), nil
}

// firstMessage opens a new conversation.
func (a *Agent) firstMessage() string {
	return fmt.Sprintf("Begin. Attempt %d; %s left until the deadline (%s).", a.Env.Attempt,
		time.Until(a.Env.CurrentDeadline()).Round(time.Second), a.Env.CurrentDeadline().Format(time.RFC3339))
}

// progress is the note of the time and budget used, put to the model at
// intervals.
func (a *Agent) progress(now time.Time) string {
	left := a.Env.CurrentDeadline().Sub(now).Round(time.Second)
	s := fmt.Sprintf("[mlrb] %s left until the deadline (%s). LLM use so far: %d calls, %d input and %d output tokens, $%.4f",
		left, a.Env.CurrentDeadline().Format(time.RFC3339), a.state.Calls, a.state.InputTokens, a.state.OutTokens, a.state.CostUSD)
	if b := a.Env.LLMBudgetUSD; b > 0 {
		s += fmt.Sprintf(" of a $%.2f budget (%.0f%%)", b, 100*a.state.CostUSD/b)
	}
	if a.state.Submitted != "" {
		s += ". Last submission: " + a.state.Submitted
	} else {
		s += ". Nothing submitted yet"
	}
	return s + "."
}

// resumeMessage tells the model what the worker said of the loss this
// attempt resumes after, what was in flight, and which jobs are gone.
func (a *Agent) resumeMessage(lostJobs []Job, interrupted []Call) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[mlrb] This is attempt %d, resumed: the last attempt ended and the work dir was restored from its last checkpoint; this conversation is as it was then.", a.Env.Attempt)
	if f := a.Env.ResumeFile; f != "" {
		if n, err := contract.ReadResumeNote(f); err != nil {
			fmt.Fprintf(&b, " The resume note (%s) could not be read: %v.", f, err)
		} else {
			fmt.Fprintf(&b, "\nThe worker's resume note: attempt %d after attempt %d (%s). Restored checkpoint #%d, taken at %s at %.0f s of agent time. The run was down %.0f s; %.0f s of agent work past checkpoints are lost in all.",
				n.Attempt, n.LastAttempt, n.LastEnded, n.Checkpoint.Seq, n.Checkpoint.At.Format(time.RFC3339), n.Checkpoint.AgentS, n.DownS, n.LostAgentS)
			for _, p := range n.Running {
				fmt.Fprintf(&b, "\n- was running: pid %d, started at %.0f s: %s", p.PID, p.StartAgentS, p.Command)
			}
		}
	}
	for _, j := range lostJobs {
		fmt.Fprintf(&b, "\n- job %s was running and is gone (its log up to the checkpoint is in %s): %s", j.ID, j.Log, j.Command)
	}
	for _, c := range interrupted {
		fmt.Fprintf(&b, "\n- your call %s (%s) was interrupted: check what it did before you run it again", c.ID, c.Name)
	}
	b.WriteString("\nFiles written after the checkpoint are gone. Check the work dir, then go on from here.")
	return b.String()
}

// lostJobs marks the jobs a dead attempt left running as lost.
func (s *State) lostJobs(attempt int) []Job {
	var out []Job
	ids := make([]string, 0, len(s.Jobs))
	for id := range s.Jobs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if j := s.Jobs[id]; j.Status == JobRunning && j.Attempt != attempt {
			j.Status = JobLost
			out = append(out, *j)
		}
	}
	return out
}
