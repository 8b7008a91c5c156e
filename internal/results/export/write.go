// Writing the tables: CSV and Parquet.

package export

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/sandbox/observe"
	"github.com/mlrb/mlrb/internal/sandbox/transcript"
)

// Formats are the formats Open writes.
var Formats = []string{"parquet", "csv"}

// Writer writes an export's tables, one file each, row by row.
type Writer struct {
	dir         string
	runs        *table[RunRow]
	attempts    *table[AttemptRow]
	checkpoints *table[CheckpointRow]
	marks       *table[MarkRow]
	calls       *table[CallRow]
	scores      *table[ScoreRow]
	experiments *table[ExperimentRow]
	gpuSamples  *table[GPUSampleRow]
}

// Open creates dir and a file per table in format.
func Open(dir, format string) (*Writer, error) {
	if !slices.Contains(Formats, format) {
		return nil, fmt.Errorf("format %q is not one of %s", format, strings.Join(Formats, ", "))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	file := func(name string) string { return filepath.Join(dir, name+"."+format) }
	var errs [8]error
	w := &Writer{dir: dir}
	w.runs, errs[0] = newTable[RunRow](file("runs"), format)
	w.attempts, errs[1] = newTable[AttemptRow](file("attempts"), format)
	w.checkpoints, errs[2] = newTable[CheckpointRow](file("checkpoints"), format)
	w.marks, errs[3] = newTable[MarkRow](file("marks"), format)
	w.calls, errs[4] = newTable[CallRow](file("calls"), format)
	w.scores, errs[5] = newTable[ScoreRow](file("scores"), format)
	w.experiments, errs[6] = newTable[ExperimentRow](file("experiments"), format)
	w.gpuSamples, errs[7] = newTable[GPUSampleRow](file("gpu_samples"), format)
	if err := errors.Join(errs[:]...); err != nil {
		_ = w.Close()
		return nil, err
	}
	return w, nil
}

// Result writes a run's rows: the run, its attempts, checkpoints, marks
// and scores.
func (w *Writer) Result(benchmarkID string, r *runs.Result) error {
	run := RunRow{BenchmarkID: benchmarkID, RunID: r.RunID, Task: r.Task, Agent: r.Agent, Seed: r.Seed, Outcome: string(r.Outcome), Score: r.Score,
		Reason: r.Reason, Attempts: int64(r.Attempts), Checkpoints: int64(r.Checkpoints), EvalTries: int64(r.EvalTries), TimeLimitS: r.TimeLimitS,
		GrantedS: r.Budget.GrantedS(), AgentS: r.Budget.UsedS, LostS: r.Budget.LostS, InfraWaitS: r.Budget.InfraWaitS,
		GPUHours: r.Cost.GPUHours, BilledGPUH: r.Cost.BilledGPUHours, Hardware: r.Hardware, SpecHash: r.SpecHash, AgentImage: r.AgentImage, EvalImage: r.EvaluatorImage}
	if d := r.AgentDef; d != nil {
		run.AgentHash, run.Provider, run.Model = d.Hash, d.Provider, d.Model
		if d.Image != "" {
			run.AgentImage = d.Image
		}
	}
	if l := r.Cost.LLM; l != nil {
		run.LLMCalls, run.LLMTokens, run.LLMUSD = l.Calls, l.Tokens.Total(), l.USD
	}
	if p := r.Cost.LLMPrices; p != nil {
		run.LLMPrices = p.Date + " " + p.SHA256
	}
	run.GPUUSD = r.Cost.GPUUSD
	if p := r.Cost.GPUPrices; p != nil {
		run.GPUPrices = fmt.Sprintf("%s %s %s at $%g/GPU-h", p.Date, p.SHA256, p.Class, p.USDPerGPUHour)
	}
	if m := r.Research; m != nil {
		run.Experiments, run.ExpPerHour, run.GPUBusy, run.FirstModelS = int64(m.Experiments), m.PerHour, m.GPUBusyShare, m.FirstModelS
		run.StallS, run.NoModelGPUH, run.CutOffHours = m.LongestStallS, m.GPUHoursNoModel, m.CutOffHours
	}
	if err := w.runs.write(run); err != nil {
		return err
	}
	for _, a := range r.AttemptLog {
		if err := w.attempts.write(AttemptRow{RunID: r.RunID, N: int64(a.N), Host: a.Host, LeaseWaitS: a.LeaseWaitS, LeasedAt: a.LeasedAt.UTC(), EndedAt: a.EndedAt.UTC(),
			FromS: a.FromS, ToS: a.ToS, LostS: a.LostS, End: a.End, Detail: a.Detail}); err != nil {
			return err
		}
	}
	for _, c := range r.CheckpointLog {
		if err := w.checkpoints.write(CheckpointRow{RunID: r.RunID, Seq: int64(c.Seq), Attempt: int64(c.Attempt), At: c.At.UTC(), AgentS: c.AgentS,
			Files: int64(c.Files), Bytes: c.Bytes, NewBytes: c.NewBytes, Final: c.Final}); err != nil {
			return err
		}
	}
	for _, m := range r.Curve {
		if err := w.marks.write(MarkRow{RunID: r.RunID, Task: r.Task, Agent: r.Agent, Seed: r.Seed, AtS: m.AtS, Seq: int64(m.Seq), AgentS: m.AgentS,
			Score: m.Score, Best: m.Best, NoModel: m.NoModel, Error: m.Error, Split: m.Split, Tries: int64(m.Tries), CostUSD: m.CostUSD}); err != nil {
			return err
		}
	}
	metrics := make([]string, 0, len(r.Metrics))
	for k := range r.Metrics {
		metrics = append(metrics, k)
	}
	sort.Strings(metrics)
	for _, k := range metrics {
		if err := w.scores.write(ScoreRow{RunID: r.RunID, Task: r.Task, Agent: r.Agent, Seed: r.Seed, Metric: k, Value: r.Metrics[k]}); err != nil {
			return err
		}
	}
	return nil
}

// Calls writes a run's recorded calls and connections.
func (w *Writer) Calls(runID string, calls []transcript.Call) error {
	for _, c := range calls {
		t := c.Usage.Tokens
		if err := w.calls.write(CallRow{RunID: runID, Attempt: int64(c.Attempt), Seq: int64(c.Seq), Kind: string(c.Kind), Start: c.Start.UTC(),
			LatencyMS: c.LatencyMS, FirstByteMS: c.FirstByteMS, API: string(c.API), Model: c.Model, Status: int64(c.Status), Error: c.Error,
			InputTokens: t.Input, CacheRead: t.CacheRead, CacheWrite: t.CacheWrite, OutputTokens: t.Output, USD: c.Usage.USD,
			Host: c.Host, Sent: c.Sent, Received: c.Received}); err != nil {
			return err
		}
	}
	return nil
}

// Research writes a run's experiments and its GPU samples.
func (w *Writer) Research(r *runs.Result, rs observe.Research, obs []*observe.Observation) error {
	for _, e := range rs.Experiments {
		row := ExperimentRow{RunID: r.RunID, Task: r.Task, Agent: r.Agent, Seed: r.Seed, Attempt: int64(e.Attempt), PID: int64(e.PID), Command: e.Command,
			Start: e.Start.UTC(), End: e.End.UTC(), StartS: e.StartS, EndS: e.EndS, CPUS: e.CPUS, PeakRSS: e.PeakRSS, GPUMiB: e.GPUMiB, GPUHours: e.GPUHours,
			MeanUtil: e.MeanUtil, Outcome: string(e.Outcome)}
		if m := e.Model; m != nil {
			row.ModelSeq, row.ModelPath, row.ModelScore, row.ModelSplit = int64(m.Checkpoint), m.Path, m.Score, m.Split
		}
		if err := w.experiments.write(row); err != nil {
			return err
		}
	}
	for _, o := range obs {
		for _, g := range o.GPU {
			if err := w.gpuSamples.write(GPUSampleRow{RunID: r.RunID, Attempt: int64(o.Attempt), At: g.At.UTC(), AgentS: o.AgentAt(g.At), Device: int64(g.Index),
				Util: g.Util, MemMiB: g.MemMiB, PowerW: g.PowerW}); err != nil {
				return err
			}
		}
	}
	return nil
}

// Close ends every table and writes schema.json beside them.
func (w *Writer) Close() error {
	var errs []error
	for _, t := range []interface{ close() error }{w.runs, w.attempts, w.checkpoints, w.marks, w.calls, w.scores, w.experiments, w.gpuSamples} {
		errs = append(errs, t.close())
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	b, err := json.MarshalIndent(map[string]any{"version": SchemaVersion, "tables": Schema()}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(w.dir, "schema.json"), b, 0o644)
}

// table is one file: a Parquet writer, or CSV with a header row.
type table[T any] struct {
	f   *os.File
	pq  *parquet.GenericWriter[T]
	csv *csv.Writer
	buf []T
}

func newTable[T any](path, format string) (*table[T], error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	t := &table[T]{f: f}
	if format == "parquet" {
		t.pq = parquet.NewGenericWriter[T](f, parquet.Compression(&parquet.Zstd))
		return t, nil
	}
	t.csv = csv.NewWriter(f)
	var cols []string
	for _, c := range columns(reflect.TypeFor[T]()) {
		cols = append(cols, c.Name)
	}
	if err := t.csv.Write(cols); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("export %s: %w", path, err)
	}
	return t, nil
}

// rowsPerWrite batches Parquet rows: one call per row would be slow.
const rowsPerWrite = 4096

func (t *table[T]) write(row T) error {
	if t.csv != nil {
		return t.csv.Write(csvRow(reflect.ValueOf(row)))
	}
	t.buf = append(t.buf, row)
	if len(t.buf) >= rowsPerWrite {
		return t.flush()
	}
	return nil
}

func (t *table[T]) flush() error {
	if len(t.buf) == 0 {
		return nil
	}
	_, err := t.pq.Write(t.buf)
	t.buf = t.buf[:0]
	if err != nil {
		return fmt.Errorf("export %s: %w", t.f.Name(), err)
	}
	return nil
}

// close ends the file; a table that was never opened has nothing to end.
func (t *table[T]) close() error {
	if t == nil {
		return nil
	}
	var err error
	if t.csv != nil {
		t.csv.Flush()
		err = t.csv.Error()
	} else {
		err = errors.Join(t.flush(), t.pq.Close())
	}
	return errors.Join(err, t.f.Close())
}

func csvRow(v reflect.Value) []string {
	out := make([]string, v.NumField())
	for i := range out {
		out[i] = cell(v.Field(i))
	}
	return out
}

// cell renders a value for CSV: RFC 3339 times, shortest floats, an
// empty cell for a missing optional value, and a string a spreadsheet
// would run as a formula (it begins with = + - @, a tab or a carriage
// return: an agent chooses model names and hosts) behind a quote. The
// Parquet tables keep the raw value.
func cell(f reflect.Value) string {
	switch x := f.Interface().(type) {
	case time.Time:
		if x.IsZero() {
			return ""
		}
		return x.UTC().Format(time.RFC3339Nano)
	case *float64:
		if x == nil {
			return ""
		}
		return strconv.FormatFloat(*x, 'g', -1, 64)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case int64:
		return strconv.FormatInt(x, 10)
	case bool:
		return strconv.FormatBool(x)
	case string:
		if x != "" && strings.ContainsRune("=+-@\t\r", rune(x[0])) {
			return "'" + x
		}
		return x
	}
	panic(fmt.Sprintf("export: no CSV form for %s", f.Type()))
}

// Column is one column of a table's schema.
type Column struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Doc  string `json:"doc"`
}

// TableSchema is one table's.
type TableSchema struct {
	Name    string   `json:"name"`
	Doc     string   `json:"doc"`
	Columns []Column `json:"columns"`
}

// Schema is the export's tables and columns, from the row types.
func Schema() []TableSchema {
	return []TableSchema{
		{"runs", "one row per run", columns(reflect.TypeFor[RunRow]())},
		{"attempts", "one row per agent attempt", columns(reflect.TypeFor[AttemptRow]())},
		{"checkpoints", "one row per committed checkpoint", columns(reflect.TypeFor[CheckpointRow]())},
		{"marks", "one row per point of a run's score over time", columns(reflect.TypeFor[MarkRow]())},
		{"calls", "one row per LLM call or connection the gateway recorded", columns(reflect.TypeFor[CallRow]())},
		{"scores", "one row per metric of a run's final evaluation", columns(reflect.TypeFor[ScoreRow]())},
		{"experiments", "one row per experiment the worker saw the agent run (internal/sandbox/observe)", columns(reflect.TypeFor[ExperimentRow]())},
		{"gpu_samples", "one row per sample of a leased GPU", columns(reflect.TypeFor[GPUSampleRow]())},
	}
}

func columns(t reflect.Type) []Column {
	out := make([]Column, t.NumField())
	for i := range out {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("parquet"), ",")
		typ := map[string]string{"string": "string", "int64": "int64", "float64": "double", "bool": "boolean", "*float64": "double", "time.Time": "timestamp (UTC)"}[f.Type.String()]
		if strings.Contains(opts, "optional") {
			typ += ", optional"
		}
		out[i] = Column{Name: name, Type: typ, Doc: f.Tag.Get("doc")}
	}
	return out
}
