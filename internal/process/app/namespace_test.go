package app

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/mlrb/mlrb/internal/kit/ports"
	"github.com/mlrb/mlrb/internal/process/devserver"
	"github.com/mlrb/mlrb/workflows"
)

// TestNamespaceCheckAndSetup, on a real Temporal server whose namespace
// lacks one of mlrb's search attributes: the check refuses it naming
// that attribute and both fixes, setup registers it (and nothing else),
// and a namespace that does not exist is named with the flag that
// creates it, then created with the retention asked for.
func TestNamespaceCheckAndSetup(t *testing.T) {
	port, err := ports.Reserve("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	defer port.Release()
	sas := map[string]enumspb.IndexedValueType{}
	names := workflows.SearchAttributeNames()
	for _, n := range names[1:] {
		sas[n] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
	}
	ctx := context.Background()
	srv, err := devserver.Start(ctx, devserver.Options{StateDir: t.TempDir(), Port: port.Number, Namespace: "mlrb", SearchAttributes: sas})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	c, err := client.DialContext(ctx, client.Options{HostPort: srv.Address(), Namespace: "mlrb"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = CheckNamespace(ctx, c, "mlrb")
	var se *SetupError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "lacks mlrb's search attributes "+names[0]+":") || !strings.Contains(err.Error(), "starter setup") ||
		!strings.Contains(err.Error(), "temporal operator search-attribute create --namespace mlrb --name "+names[0]+" --type Keyword") {
		t.Fatalf("check of a namespace without %s: %v", names[0], err)
	}
	rep, err := SetupNamespace(ctx, c, "mlrb", SetupOptions{})
	if err != nil || rep.Created || len(rep.Added) != 1 || rep.Added[0] != names[0] || rep.Retention != 24*time.Hour {
		t.Fatalf("setup: %+v, %v", rep, err)
	}
	if err := CheckNamespace(ctx, c, "mlrb"); err != nil {
		t.Fatalf("check after setup: %v", err)
	}
	_, err = SetupNamespace(ctx, c, "fresh", SetupOptions{})
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "--create-namespace") {
		t.Fatalf("setup of a namespace that does not exist, without --create-namespace: %v", err)
	}
	rep, err = SetupNamespace(ctx, c, "fresh", SetupOptions{Create: true, Retention: 240 * time.Hour})
	if err != nil || !rep.Created || rep.Retention != 240*time.Hour || len(rep.Added) != len(names) {
		t.Fatalf("setup --create-namespace: %+v, %v", rep, err)
	}
}
