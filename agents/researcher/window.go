// windows are the context windows of the models the shipped definitions name, by prefix (the longest that matches).

package researcher

import (
	"context"
	"fmt"
	"strings"
)

// windows are the context windows of the models the shipped definitions
// name, by prefix (the longest that matches); RESEARCHER_CONTEXT_WINDOW
// overrides for any other.
var windows = []struct {
	prefix string
	tokens int64
}{
	{"gpt-4o", 128_000}, {"gpt-4.1", 1_047_576}, {"gpt-5", 400_000}, {"o3", 200_000}, {"o4", 200_000},
	{"claude-", 200_000},
}

// defaultWindow is the window of a model the table does not know.
const defaultWindow = 128_000

// Window is model's context window in tokens.
func Window(model string) int64 {
	best, n := int64(defaultWindow), 0
	for _, w := range windows {
		if strings.HasPrefix(model, w.prefix) && len(w.prefix) > n {
			best, n = w.tokens, len(w.prefix)
		}
	}
	return best
}

// Shares of the window: past compactAt of it the conversation is
// summarised; a request is never sent past sendAt of it (less the
// output it may bring).
const (
	compactAt = 0.70
	sendAt    = 0.95
	// keepTail is the share of the window the turns kept whole after a
	// compaction may take.
	keepTail = 0.20
	// bytesPerToken is the rate before the provider has reported one:
	// low, so the estimate errs large.
	bytesPerToken = 2.5
)

// requestBytes is what a request carries of the conversation.
func requestBytes(system string, msgs []Message, tools []ToolSpec) int64 {
	n := int64(len(system))
	for _, m := range msgs {
		n += int64(m.size()) + 16
	}
	for _, t := range tools {
		n += int64(len(t.Name) + len(t.Description) + 256)
	}
	return n
}

// estimate is a request's size in tokens: its bytes at the rate the
// provider's last reported usage shows (never below the cautious one).
func (a *Agent) estimate(msgs []Message) int64 {
	b := requestBytes(a.state.System, msgs, a.specs())
	rate := bytesPerToken
	if a.state.Context > 0 && a.state.ContextBytes > 0 {
		rate = min(float64(a.state.ContextBytes)/float64(a.state.Context), 4)
	}
	return int64(float64(b)/rate) + 1
}

// fit makes the next request fit its window: a compaction past
// compactAt, then clipping the oldest tool outputs until it is under
// sendAt, whatever the summary brought.
func (a *Agent) fit(ctx context.Context) error {
	limit := int64(float64(a.Window)*sendAt) - a.MaxOutput
	if a.estimate(a.state.Messages) > int64(float64(a.Window)*compactAt) {
		if err := a.compact(ctx); err != nil {
			return err
		}
	}
	for i := 0; a.estimate(a.state.Messages) > limit; i++ {
		if i >= len(a.state.Messages)-1 {
			return fmt.Errorf("the conversation's last turn alone (%d tokens) is past the window of %d", a.estimate(a.state.Messages), a.Window)
		}
		m := &a.state.Messages[i]
		if len(m.Text) > 512 {
			m.Text = clip(m.Text, 512, "(cut to fit the window)")
		}
	}
	return nil
}

const summaryPrompt = "[mlrb] The conversation is near the model's context window and will be cut. Write a summary that lets you go on without it: the task and its rules, what you tried and each result (with numbers), the files and models that matter and where they are, the background jobs and their state, what you submitted, and your plan. Answer with the summary only; call no tool."

// compact replaces the conversation with a summary of it and the last
// turns, kept whole where they fit.
func (a *Agent) compact(ctx context.Context) error {
	msgs := append(a.trimmedForSummary(), Message{Role: RoleUser, Text: summaryPrompt})
	reply, err := a.send(ctx, msgs)
	if err != nil {
		return fmt.Errorf("compaction: %w", err)
	}
	tail := a.tail()
	a.mu.Lock()
	a.state.Summary = reply.Message.Text
	a.state.Compactions++
	a.state.Messages = append([]Message{{Role: RoleUser, Text: "[mlrb] Summary of the work so far (compaction " +
		fmt.Sprint(a.state.Compactions) + "):\n" + reply.Message.Text}}, tail...)
	a.mu.Unlock()
	a.logf("compacted the conversation (%d): %d turns kept whole", a.state.Compactions, len(tail))
	return a.save()
}

// trimmedForSummary is the conversation as the summary request carries
// it: old tool outputs clipped until it is under the window.
func (a *Agent) trimmedForSummary() []Message {
	msgs := append([]Message(nil), a.state.Messages...)
	limit := int64(float64(a.Window)*sendAt) - a.MaxOutput - 1024
	for i := 0; i < len(msgs) && a.estimate(msgs) > limit; i++ {
		if len(msgs[i].Text) > 512 {
			msgs[i].Text = clip(msgs[i].Text, 512, "(cut for the summary)")
		}
	}
	return msgs
}

// tail is the last turns to keep whole after a compaction: from the
// last assistant turn on (a call is never parted from its results), when
// they fit in keepTail of the window.
func (a *Agent) tail() []Message {
	msgs := a.state.Messages
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != RoleAssistant {
			continue
		}
		kept := append([]Message(nil), msgs[i:]...)
		if a.estimate(kept) <= int64(float64(a.Window)*keepTail) {
			return kept
		}
		break
	}
	return nil
}
