// A person's attach sessions on a run's page.

package report

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"

	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/sandbox/attach"
	"github.com/mlrb/mlrb/internal/store/blob"
)

// session is a person's attach session as a run's page lists it: its
// recording beside the page (asciicast v2, which asciinema plays too) and
// the script the page's player loads.
type session struct {
	N        int
	Name     string
	Cast     string
	Script   string
	Width    uint
	Height   uint
	Duration string
}

// writeSessions copies a person's run's recordings beside its page: the
// cast as it is, and its output events as a script the page replays.
func writeSessions(ctx context.Context, dir string, in Input, r *runs.Result) ([]session, error) {
	if r.AgentDef == nil || r.AgentDef.Human == "" {
		return nil, nil
	}
	keys, err := in.Store.List(ctx, attach.SessionsPrefix(r.RunID))
	if err != nil {
		return nil, fmt.Errorf("sessions of %s: %w", r.RunID, err)
	}
	var out []session
	for i, k := range keys {
		b, err := blob.ReadAll(ctx, in.Store, k.Key, attach.MaxCast+1<<20)
		if err != nil {
			return out, err
		}
		s := session{N: i + 1, Name: path.Base(k.Key), Cast: fmt.Sprintf("%s/session-%d.cast", Key(r.RunID), i+1), Script: fmt.Sprintf("%s/session-%d.js", Key(r.RunID), i+1)}
		h, events, last, err := attach.ReadCast(b)
		if err != nil {
			return out, fmt.Errorf("%s: %w", k.Key, err)
		}
		s.Width, s.Height, s.Duration = h.Width, h.Height, human(last)
		var output [][2]any // what the page's player shows: [seconds, text]
		for _, ev := range events {
			if ev.Kind == "o" {
				output = append(output, [2]any{ev.At, ev.Data})
			}
		}
		js, _ := json.Marshal(output) // strings and numbers: never fails
		if err := os.MkdirAll(filepath.Join(dir, "runs", Key(r.RunID)), 0o755); err != nil {
			return out, err
		}
		if err := os.WriteFile(filepath.Join(dir, "runs", s.Cast), b, 0o644); err != nil {
			return out, err
		}
		if err := os.WriteFile(filepath.Join(dir, "runs", s.Script), fmt.Appendf(nil, "mlrbSession(%d,%s);\n", s.N, js), 0o644); err != nil {
			return out, err
		}
		out = append(out, s)
	}
	return out, nil
}
