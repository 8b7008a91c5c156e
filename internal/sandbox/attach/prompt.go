// The paused prompt a person sees.

package attach

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/mlrb/mlrb/internal/run/contract"
)

// promptHelp is what the paused prompt takes.
const promptHelp = "type `task start` to start the clock, `task status`, `task note TEXT`, `task submit`; Ctrl-D detaches"

// prompt is the clock's prompt while it is paused: the container is
// frozen, so the worker itself reads the person's line. "" means look
// again (the clock started, here or in another session; the attempt
// ended).
func (ss *session) prompt(ctx context.Context, changed, done <-chan struct{}, do func(verb, text string) (contract.Clock, error), now contract.Clock, brief string) string {
	msg := "\n[mlrb] " + now.String() + "\n"
	if brief != "" {
		msg += "[mlrb] " + brief + "\n"
	}
	_ = ss.say(msg + "[mlrb] " + promptHelp + "\n")
	for {
		line, why := ss.readLine(ctx, "paused> ", changed, done)
		if why != "" {
			return why
		}
		if line == "" {
			continue
		}
		if line == "\x00" { // the clock changed or the attempt ended
			return ""
		}
		verb, text := parseVerb(line)
		if verb == "" {
			_ = ss.say("[mlrb] " + promptHelp + "\n")
			continue
		}
		c, err := do(verb, text)
		if err != nil {
			_ = ss.say(fmt.Sprintf("[mlrb] task %s: %v\n", verb, err))
			continue
		}
		_ = ss.say("[mlrb] " + c.String() + "\n")
		if verb == contract.ClockStart || verb == contract.ClockSubmit {
			return ""
		}
	}
}

// released is the prompt of a run that gave its GPU back (or never took
// one): starting the clock asks the run to lease again, and the person
// waits here for their container.
func (ss *session) released(ctx context.Context, w Whereabouts) string {
	now := contract.Clock{AgentS: w.AgentS, LeftS: w.LeftS}
	return ss.prompt(ctx, nil, nil, func(verb, text string) (contract.Clock, error) {
		switch verb {
		case contract.ClockStatus:
			now.Said = "your run holds no GPU until you start the clock"
			return now, nil
		case contract.ClockStart:
			if err := ss.s.Runs.Resume(ctx, ss.hello.Run); err != nil {
				return now, err
			}
			now.Said = "leasing a GPU and restoring your work; your shell opens when it is ready"
			return now, nil
		}
		return now, fmt.Errorf("start the clock first: your run holds no container now")
	}, now, "")
}

// readLine reads a line of the person's keystrokes, echoing them: the
// terminal is raw, so the prompt edits (backspace, Ctrl-U, Ctrl-C). It
// returns "\x00" when changed or done closes first, and why the session
// ends when it does.
func (ss *session) readLine(ctx context.Context, prompt string, changed, done <-chan struct{}) (string, string) {
	_ = ss.say(prompt)
	var line []rune
	for {
		var p []byte
		select {
		case p = <-ss.in:
		case <-changed:
			return "\x00", ""
		case <-done:
			return "\x00", ""
		case <-ss.gone:
			return "", "the person's terminal went"
		case <-ctx.Done():
			return "", "the worker is stopping"
		}
		for _, r := range string(p) {
			switch {
			case r == '\r' || r == '\n':
				_ = ss.say("\n")
				return strings.TrimSpace(string(line)), ""
			case r == 4 && len(line) == 0: // Ctrl-D
				return "", "detached"
			case r == 3 || r == 21: // Ctrl-C, Ctrl-U
				line = line[:0]
				_ = ss.say("^C\n" + prompt)
			case r == 127 || r == 8:
				if len(line) > 0 {
					line = line[:len(line)-1]
					_ = ss.say("\b \b")
				}
			case r >= ' ' && len(line) < MaxNote:
				line = append(line, r)
				_ = ss.say(string(r))
			}
		}
	}
}

// parseVerb reads "task VERB [TEXT]" or "VERB [TEXT]".
func parseVerb(line string) (string, string) {
	line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "task "))
	verb, text, _ := strings.Cut(line, " ")
	for _, v := range contract.ClockVerbs {
		if v == verb {
			return verb, strings.TrimSpace(text)
		}
	}
	return "", ""
}

// redirect sends the person to the host their run went on at.
func (ss *session) redirect(ctx context.Context, host string) string {
	if ss.s.Peers == nil {
		return "the run goes on at host " + host + ": attach again"
	}
	ep, ok := ss.s.Peers(ctx, host)
	if !ok {
		return "the run goes on at host " + host + ", which takes no attaches: ask the operator"
	}
	b, _ := json.Marshal(ep)
	ss.wmu.Lock()
	_ = writeFrame(ss.conn, frameRedirect, b)
	ss.wmu.Unlock()
	return "the run goes on at host " + host
}

// wait shows what the run does and waits a poll (Ctrl-D detaches).
func (ss *session) wait(ctx context.Context, what string) string {
	_ = ss.say("\r[mlrb] " + what + " ")
	select {
	case <-ss.gone:
		return "the person's terminal went"
	case p := <-ss.in:
		if strings.ContainsRune(string(p), 4) {
			return "detached"
		}
	case <-time.After(ss.s.poll()):
	case <-ctx.Done():
		return "the worker is stopping"
	}
	return ""
}
