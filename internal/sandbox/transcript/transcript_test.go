package transcript

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/internal/store/blob"
)

func TestPolynomialIsIrreducible(t *testing.T) {
	if !pol.Irreducible() {
		t.Fatal("the chunker's polynomial is not irreducible")
	}
}

// TestRepeatedPromptsStoredOnce: a conversation that grows by one
// message per call, as an agent's does, is read back byte for byte, and
// its store holds little more than the last prompt, not every prompt.
func TestRepeatedPromptsStoredOnce(t *testing.T) {
	ctx := context.Background()
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var ledger llm.Ledger
	r := &Recorder{Store: store, RunID: "run-1", Attempt: 2, Redact: []string{"sk-secret-1"}, Ledger: func() llm.Ledger { return ledger.Clone() }}
	var msgs []string
	var sent [][]byte
	var total int
	for i := range 40 {
		msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":%q}`, strings.Repeat(fmt.Sprintf("step %d of the research; ", i), 200)))
		body := []byte(`{"model":"gpt-4o","messages":[` + strings.Join(msgs, ",") + `]}`)
		sent = append(sent, body)
		total += len(body)
		ledger.Record("gpt-4o", llm.Usage{Calls: 1, USD: 0.01})
		r.Add(Call{Kind: KindLLM, Model: "gpt-4o", Headers: map[string]string{"user-agent": "x sk-secret-1"}, Usage: llm.Usage{Calls: 1, USD: 0.01}}, body, []byte(`{"ok":"sk-secret-1"}`))
		r.Wait() // in order, so that each call's ledger is the one after it
	}
	calls, err := List(ctx, store, "run-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 40 || calls[39].Seq != 40 || calls[39].Attempt != 2 {
		t.Fatalf("%d calls, last %+v", len(calls), calls[len(calls)-1])
	}
	for i, c := range calls {
		got, err := ReadBody(ctx, store, "run-1", c.Request)
		if err != nil || !bytes.Equal(got, sent[i]) {
			t.Fatalf("call %d: body differs (%v)", i+1, err)
		}
	}
	resp, _ := ReadBody(ctx, store, "run-1", calls[0].Response)
	if bytes.Contains(resp, []byte("sk-secret-1")) || strings.Contains(calls[0].Headers["user-agent"], "sk-secret-1") {
		t.Error("a secret was stored")
	}
	objs, _ := store.List(ctx, "")
	var stored int64
	for _, o := range objs {
		if strings.Contains(o.Key, "/chunks/") {
			stored += o.Size
		}
	}
	if last := len(sent[39]); stored > int64(last) {
		t.Errorf("stored %d bytes of chunks for %d bytes of prompts; the last alone is %d", stored, total, last)
	}
	totals, err := Totals(ctx, store, "run-1", 3)
	if err != nil || totals[2].Calls != 40 {
		t.Errorf("totals %+v %v", totals, err)
	}
	if totals, _ := Totals(ctx, store, "run-1", 2); len(totals) != 0 {
		t.Errorf("attempts before 2: %+v", totals)
	}
}

// gatedStore puts nothing until its gate opens: a store that cannot keep
// up with a flood.
type gatedStore struct {
	blob.Store
	gate chan struct{}
}

func (s gatedStore) Put(ctx context.Context, key string, r io.Reader) error {
	<-s.gate
	return s.Store.Put(ctx, key, r)
}

// TestRefusedFloodIsBounded (audit H3): a flood of refused calls faster
// than the store holds at most MaxQueued records waiting (goroutines
// included); the rest are counted in a record of their own, so every
// call is accounted for, and a billed call is always recorded alone.
func TestRefusedFloodIsBounded(t *testing.T) {
	fs, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	r := &Recorder{Store: gatedStore{fs, gate}, RunID: "run-1", Attempt: 1}
	before := runtime.NumGoroutine()
	const flood = 20000
	peak := 0
	for i := range flood {
		r.Add(Call{Kind: KindLLM, Error: "no such path", Status: 404}, nil, nil)
		if i%1000 == 0 {
			peak = max(peak, runtime.NumGoroutine()-before)
		}
	}
	r.Add(Call{Kind: KindLLM, Model: "gpt-4o", Usage: llm.Usage{Calls: 1, USD: 0.5, Tokens: llm.Tokens{Input: 10}}}, nil, nil)
	if peak > MaxQueued+64 {
		t.Fatalf("%d goroutines waiting to store records, over MaxQueued = %d", peak, MaxQueued)
	}
	close(gate)
	r.Wait()
	calls, err := List(context.Background(), fs, "run-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	var refused, counted int64
	billed := 0
	for _, c := range calls {
		switch {
		case c.Usage.USD > 0:
			billed++
		case c.Usage.Refused > 0:
			counted += c.Usage.Refused
		default:
			refused++
		}
	}
	if billed != 1 || refused+counted != flood || counted == 0 || len(calls) > flood/2 {
		t.Fatalf("%d records: %d billed, %d refused alone, %d counted together; want 1 billed and %d refused in all", len(calls), billed, refused, counted, flood)
	}
}

// TestUnbilledCostsBoundedBytes (audit H2): a call the provider billed
// nothing for keeps its body's head, its size and its hash, whatever the
// agent sent; a secret across the cut is masked before it is cut.
func TestUnbilledCostsBoundedBytes(t *testing.T) {
	ctx := context.Background()
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := &Recorder{Store: store, RunID: "run-1", Attempt: 1, Redact: []string{"sk-secret-1"}}
	big := append(bytes.Repeat([]byte("x"), MaxUnbilledBody-4), []byte("sk-secret-1")...)
	big = append(big, make([]byte, 8<<20)...)
	for range 16 {
		_, _ = rand.Read(big[MaxUnbilledBody+64:])
		r.Add(Call{Kind: KindLLM, Model: "unpriced", Status: 400, Error: "no price", Usage: llm.Usage{Refused: 1}}, big, nil)
	}
	r.Wait()
	calls, err := List(ctx, store, "run-1", 0)
	if err != nil || len(calls) != 16 {
		t.Fatalf("%d calls: %v", len(calls), err)
	}
	b := calls[0].Request
	if b == nil || b.Bytes != int64(len(big)) || !b.Truncated || len(b.BLAKE3) != 64 {
		t.Fatalf("request %+v: want its size, truncated and a hash", b)
	}
	head, err := ReadBody(ctx, store, "run-1", b)
	if err != nil || len(head) > MaxUnbilledBody || bytes.Contains(head, []byte("sk-")) {
		t.Fatalf("head of %d bytes (%v): %q", len(head), err, head[max(0, len(head)-16):])
	}
	objs, _ := store.List(ctx, "")
	var stored int64
	for _, o := range objs {
		stored += o.Size
	}
	if stored > 1<<20 {
		t.Fatalf("16 refused calls of 8 MiB stored %d bytes", stored)
	}
	// Secrets longer than their mask, back to back: masking shrinks the
	// head, and what is kept still holds no piece of one.
	long := "sk-a-much-longer-secret-value-0123456789"
	r2 := &Recorder{Store: store, RunID: "run-2", Attempt: 1, Redact: []string{long}}
	r2.Add(Call{Kind: KindLLM, Status: 400, Usage: llm.Usage{Refused: 1}}, []byte(strings.Repeat(long, 4096)), nil)
	r2.Wait()
	calls, _ = List(ctx, store, "run-2", 0)
	head, err = ReadBody(ctx, store, "run-2", calls[0].Request)
	if err != nil || len(head) != MaxUnbilledBody || bytes.Contains(head, []byte("sk-")) || bytes.Contains(head, []byte("0123")) {
		t.Fatalf("head of %d bytes (%v) ends %q", len(head), err, head[max(0, len(head)-24):])
	}
}

// TestBackpressureAndRecordsAreBounded (audit H2): a storm of 429s is
// recorded once a second at most, every call counted; past MaxRecords,
// unbilled calls are counted in one record, the limit is told once, and
// a billed call is still recorded alone.
func TestBackpressureAndRecordsAreBounded(t *testing.T) {
	ctx := context.Background()
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var told []string
	r := &Recorder{Store: store, RunID: "run-1", Attempt: 1, MaxRecords: 1000, Exceeded: func(why string) { told = append(told, why) }}
	const storm = 50000
	for range storm {
		r.Add(Call{Kind: KindConnect, Host: "pypi.org:443", Status: 429, Error: "64 connections open"}, nil, nil)
	}
	for range 1500 {
		r.Add(Call{Kind: KindLLM, Status: 404, Error: "no such path", Usage: llm.Usage{Refused: 1}}, nil, nil)
	}
	r.Add(Call{Kind: KindLLM, Model: "gpt-4o", Usage: llm.Usage{Calls: 1, USD: 0.5}}, nil, nil)
	r.Wait()
	calls, err := List(ctx, store, "run-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	var throttled, refused, billed int
	for _, c := range calls {
		n := max(c.Count, 1)
		switch {
		case c.Usage.USD > 0:
			billed++
		case c.Status == 429:
			throttled += n
		default:
			refused += n
		}
	}
	if throttled != storm || refused != 1500 || billed != 1 {
		t.Fatalf("counted %d 429s, %d refused, %d billed; want %d, 1500, 1", throttled, refused, billed, storm)
	}
	if len(calls) > 1003 {
		t.Fatalf("%d records, over MaxRecords = 1000 and its summaries", len(calls))
	}
	if len(told) != 1 || !strings.Contains(told[0], "gateway.max_records") {
		t.Fatalf("told %q", told)
	}
}

// TestEachPages (audit H2): a reader walks a transcript a page at a time,
// every record once, in order.
func TestEachPages(t *testing.T) {
	ctx := context.Background()
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := &Recorder{Store: store, RunID: "run-1", Attempt: 1}
	const n = 2*page + 17
	for i := range n {
		r.Add(Call{Kind: KindLLM, Model: fmt.Sprint(i), Usage: llm.Usage{Calls: 1, USD: 0.001}}, nil, nil)
	}
	r.Wait()
	next := 1
	if err := Each(ctx, store, "run-1", 0, func(c Call) error {
		if c.Seq != next {
			return fmt.Errorf("record %d where %d was due", c.Seq, next)
		}
		next++
		return nil
	}); err != nil || next != n+1 {
		t.Fatalf("walked to %d of %d: %v", next-1, n, err)
	}
}
