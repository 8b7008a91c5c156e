package blob

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestOverlay: reads fall through to Lower, writes land in Upper only,
// listings merge with Upper's object first.
func TestOverlay(t *testing.T) {
	ctx := context.Background()
	lowerDir := t.TempDir()
	lower, _ := NewFS(lowerDir)
	upper, _ := NewFS(t.TempDir())
	if err := lower.Put(ctx, "a/1", strings.NewReader("low")); err != nil {
		t.Fatal(err)
	}
	o := &Overlay{Upper: upper, Lower: lower}
	if err := o.Put(ctx, "a/2", strings.NewReader("up")); err != nil {
		t.Fatal(err)
	}
	if err := o.Put(ctx, "a/1", strings.NewReader("shadow")); err != nil {
		t.Fatal(err)
	}
	rc, err := o.Get(ctx, "a/1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	_ = rc.Close()
	if string(b) != "shadow" {
		t.Fatalf("a/1 reads %q", b)
	}
	rc, _ = lower.Get(ctx, "a/1")
	b, _ = io.ReadAll(rc)
	_ = rc.Close()
	if string(b) != "low" {
		t.Fatalf("the lower store changed: %q", b)
	}
	objs, err := o.List(ctx, "a/")
	if err != nil || len(objs) != 2 || objs[0].Key != "a/1" || objs[1].Key != "a/2" {
		t.Fatalf("list %v %v", objs, err)
	}
	if err := lower.Put(ctx, "c", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if err := o.Create(ctx, "c", strings.NewReader("y")); !errors.Is(err, ErrExists) {
		t.Fatalf("create over a lower blob: %v", err)
	}
	if err := o.Delete(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := lower.Exists(ctx, "c"); !ok {
		t.Fatal("a delete reached the lower store")
	}
}
