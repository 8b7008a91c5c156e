// The static report: its pages, a run's page, its calls in pages.

// Package report writes a benchmark's (or a run's) report as static
// files that open from disk with no server: the leaderboard with its
// intervals and gap closed, score-over-time curves per task and agent,
// and a page per run with its attempts on a timeline, its checkpoints,
// log, cost and its LLM calls and connections. Calls are written in
// pages loaded one at a time (a 24 h run's transcript is never loaded
// whole) and searched page by page.
package report

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/mlrb/mlrb/internal/results/leaderboard"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/sandbox/observe"
	"github.com/mlrb/mlrb/internal/sandbox/transcript"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/logstore"
)

//go:embed templates/*.html
var templates embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"num": func(x float64) string {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return "—"
		}
		return fmt.Sprintf("%.4f", x)
	},
	"opt": func(x *float64) string {
		if x == nil {
			return "—"
		}
		return fmt.Sprintf("%.4f", *x)
	},
	"human":     human,
	"agentCell": leaderboard.AgentCell,
	"sub":       func(a, b float64) float64 { return a - b },
	"pct":       func(x *float64) float64 { return *x * 100 },
	"deref":     func(x *float64) float64 { return *x },
	"bytes": func(n int64) string {
		switch {
		case n >= 1<<30:
			return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
		case n >= 1<<20:
			return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
		}
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	},
	"pair":    leaderboard.PairLine,
	"success": leaderboard.SuccessCell,
	"gap":     leaderboard.GapCell,
	"ci":      leaderboard.CICell,
}).ParseFS(templates, "templates/*.html"))

// CallsPerPage is how many calls a page of a run's calls holds.
const CallsPerPage = 500

// LogTail is how much of a run's log its page keeps (its end).
const LogTail = 256 << 10

// Input is what a report shows.
type Input struct {
	// Title names the benchmark, or the run of a one-run report.
	Title   string
	Results []runs.Result
	Setup   leaderboard.Setup
	// Store holds the runs' logs and transcripts.
	Store blob.Store
	// Bodies, if positive, keeps that many bytes of each call's request
	// and response in its page (0: none; `starter calls` prints them).
	Bodies int
	// Progress, if set, hears of each run written.
	Progress func(done, total int)
	// MinExperiment is how long a process runs to be an experiment (0:
	// observe's default).
	MinExperiment time.Duration
	// Version and Generated say which mlrb wrote the report and when;
	// Partial, if set, says its runs are not all done (a banner).
	Version   string
	Generated time.Time
	Partial   []string
}

// Write writes the report under dir: index.html, leaderboard.svg and
// runs/<key>.html with runs/<key>/calls-NNNN.js.
func Write(ctx context.Context, dir string, in Input) error {
	if err := os.MkdirAll(filepath.Join(dir, "runs"), 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	board := leaderboard.Build(leaderboard.RunsOf(in.Results), in.Setup)
	var svg bytes.Buffer
	if err := leaderboard.Write(&svg, "svg", in.Title, board); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "leaderboard.svg"), svg.Bytes(), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	idx := indexPage{Title: in.Title, Statement: leaderboard.Statement, Board: board, Notes: board.Notes(in.Setup),
		Version: in.Version, Generated: in.Generated.UTC().Format("2006-01-02 15:04 MST"), Partial: in.Partial, Pivot: pivotOf(board)}
	idx.Curves = curvesByTask(in.Results, idx.Pivot.Agents)
	for i := range in.Results {
		r := &in.Results[i]
		idx.Runs = append(idx.Runs, runLink{Key: Key(r.RunID), Result: r})
	}
	if err := render(filepath.Join(dir, "index.html"), "index.html", idx); err != nil {
		return err
	}
	// Run pages are independent: written a few at a time.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(goruntime.GOMAXPROCS(0))
	var mu sync.Mutex
	done := 0
	for i := range in.Results {
		g.Go(func() error {
			if err := writeRun(gctx, dir, in, &in.Results[i]); err != nil {
				return err
			}
			if in.Progress != nil {
				mu.Lock()
				done++
				in.Progress(done, len(in.Results))
				mu.Unlock()
			}
			return nil
		})
	}
	return g.Wait()
}

// Key is a run's file name in a report: its id, made safe, and a short
// hash that keeps two ids apart.
func Key(runID string) string {
	safe := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' {
			return r
		}
		return '_'
	}, runID)
	h := sha256.Sum256([]byte(runID))
	return safe + "-" + hex.EncodeToString(h[:3])
}

type indexPage struct {
	Title     string
	Statement string
	Board     leaderboard.Board
	Notes     []string
	Version   string
	Generated string
	Partial   []string
	Pivot     pivot
	Curves    []taskCurve
	Runs      []runLink
}

type runLink struct {
	Key    string
	Result *runs.Result
}

type runPage struct {
	// Checkpoints are the run's checkpoints as a script's data: a 24 h
	// run keeps 2,000, a table the page builds when it opens.
	Checkpoints template.JS
	Key         string
	R           *runs.Result
	Curve       template.HTML
	Timeline    template.HTML
	// Research is the run's research timeline; Experiments its rows.
	Research    template.HTML
	Experiments []observe.Experiment
	Log         string
	LogNote     string
	Calls       int
	Pages       int
	PerPage     int
	CallsErr    string
	// Sessions are a person's attach sessions, replayable on the page.
	Sessions    []session
	SessionsErr string
}

// writeRun writes a run's page and its pages of calls.
func writeRun(ctx context.Context, dir string, in Input, r *runs.Result) error {
	p := runPage{Key: Key(r.RunID), R: r, PerPage: CallsPerPage}
	cks := make([][7]any, len(r.CheckpointLog))
	for i, c := range r.CheckpointLog {
		cks[i] = [7]any{c.Seq, c.Attempt, c.At.UTC().Format("2006-01-02 15:04:05"), human(c.AgentS), c.Files, c.Bytes, c.NewBytes}
		if c.Final {
			cks[i][0] = fmt.Sprintf("%d (final)", c.Seq)
		}
	}
	b, err := json.Marshal(cks)
	if err != nil {
		return err
	}
	p.Checkpoints = template.JS(b) // #nosec: JSON of our own values; html/template escapes it as a script value
	if len(r.Curve) > 0 {
		var b bytes.Buffer
		curveSVG(&b, chart{title: "best score so far over agent time", budgetS: r.TimeLimitS, split: r.Curve[0].Split},
			[]series{{name: r.Agent, color: palette[0], pts: curvePoints(r.Curve), final: r.Score}})
		p.Curve = template.HTML(b.String())
	}
	var tl bytes.Buffer
	timelineSVG(&tl, r)
	p.Timeline = template.HTML(tl.String())
	if err := research(ctx, in, r, &p); err != nil {
		return err
	}
	if p.Sessions, err = writeSessions(ctx, dir, in, r); err != nil {
		p.SessionsErr = err.Error()
	}
	p.Log, p.LogNote = logTail(ctx, in.Store, r.RunID)
	n, err := writeCalls(ctx, filepath.Join(dir, "runs", p.Key), in, r.RunID)
	if err != nil {
		p.CallsErr = err.Error()
	}
	p.Calls, p.Pages = n, (n+CallsPerPage-1)/CallsPerPage
	return render(filepath.Join(dir, "runs", p.Key+".html"), "run.html", p)
}

// call is a call as its page holds it (short names: a page holds 500).
type call struct {
	A     int      `json:"a"`
	S     int      `json:"s"`
	K     string   `json:"k"`
	T     string   `json:"t"`
	API   string   `json:"api,omitempty"`
	M     string   `json:"m,omitempty"`
	H     string   `json:"h,omitempty"`
	St    int      `json:"st,omitempty"`
	E     string   `json:"e,omitempty"`
	In    int64    `json:"in,omitempty"`
	CR    int64    `json:"cr,omitempty"`
	Out   int64    `json:"out,omitempty"`
	USD   float64  `json:"usd,omitempty"`
	MS    float64  `json:"ms"`
	FB    float64  `json:"fb,omitempty"`
	Sent  int64    `json:"tx,omitempty"`
	Recv  int64    `json:"rx,omitempty"`
	Req   string   `json:"req,omitempty"`
	Resp  string   `json:"resp,omitempty"`
	Bytes [2]int64 `json:"b"`
}

// writeCalls writes a run's calls in pages of CallsPerPage, reading its
// transcript a page at a time, and returns how many there are.
func writeCalls(ctx context.Context, dir string, in Input, runID string) (int, error) {
	if in.Store == nil {
		return 0, nil
	}
	keys, err := transcript.Keys(ctx, in.Store, runID, 0)
	if err != nil || len(keys) == 0 {
		return 0, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, fmt.Errorf("report: %w", err)
	}
	for page := 0; page*CallsPerPage < len(keys); page++ {
		batch := keys[page*CallsPerPage : min(len(keys), (page+1)*CallsPerPage)]
		cs, err := transcript.Read(ctx, in.Store, batch)
		if err != nil {
			return 0, err
		}
		rows := make([]call, len(cs))
		for i, c := range cs {
			t := c.Usage.Tokens
			rows[i] = call{A: c.Attempt, S: c.Seq, K: string(c.Kind), T: c.Start.UTC().Format("2006-01-02 15:04:05.000"), API: string(c.API), M: c.Model, H: c.Host,
				St: c.Status, E: c.Error, In: t.Input, CR: t.CacheRead, Out: t.Output, USD: c.Usage.USD, MS: c.LatencyMS, FB: c.FirstByteMS, Sent: c.Sent, Recv: c.Received}
			rows[i].Req, rows[i].Bytes[0] = body(ctx, in, runID, c.Request)
			rows[i].Resp, rows[i].Bytes[1] = body(ctx, in, runID, c.Response)
		}
		b, err := json.Marshal(rows)
		if err != nil {
			return 0, err
		}
		// A script, not JSON: pages opened from disk cannot fetch files.
		js := fmt.Sprintf("mlrbCalls(%d,%s);\n", page+1, b)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("calls-%04d.js", page+1)), []byte(js), 0o644); err != nil {
			return 0, fmt.Errorf("report: %w", err)
		}
	}
	return len(keys), nil
}

// body is the start of a call's body, when the report keeps bodies.
func body(ctx context.Context, in Input, runID string, b *transcript.Body) (string, int64) {
	if b == nil {
		return "", 0
	}
	if in.Bodies <= 0 {
		return "", b.Bytes
	}
	raw, err := transcript.ReadBody(ctx, in.Store, runID, b)
	if err != nil {
		return "(unreadable: " + err.Error() + ")", b.Bytes
	}
	if len(raw) > in.Bodies {
		raw = raw[:in.Bodies]
	}
	return strings.ToValidUTF8(string(raw), "�"), b.Bytes
}

// logTail is the end of a run's log: its last LogTail bytes, from the
// latest attempt back, each attempt's read from its end alone.
func logTail(ctx context.Context, store blob.Store, runID string) (string, string) {
	if store == nil {
		return "", "no store given"
	}
	atts, err := logstore.Attempts(ctx, store, runID)
	if err != nil {
		return "", "log unreadable: " + err.Error()
	}
	var parts []string
	left, cut := int64(LogTail), false
	for i := len(atts) - 1; i >= 0 && !cut; i-- {
		b, partial, err := logstore.Tail(ctx, store, runID, atts[i], left)
		if err != nil {
			return strings.Join(parts, ""), "log unreadable: " + err.Error()
		}
		parts = append([]string{fmt.Sprintf("── attempt %d ──\n%s", atts[i], b)}, parts...)
		left -= int64(len(b))
		cut = partial || (left <= 0 && i > 0)
	}
	note := ""
	if cut {
		note = fmt.Sprintf("the last %d KiB of the log; `starter logs %s` prints it whole", LogTail>>10, runID)
	}
	return strings.ToValidUTF8(strings.Join(parts, ""), "�"), note
}

func render(path, name string, data any) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := pages.ExecuteTemplate(f, name, data); err != nil {
		_ = f.Close()
		return fmt.Errorf("report %s: %w", name, err)
	}
	return f.Close()
}
