// The namespace: made where missing, its retention checked.

package app

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	namespacepb "go.temporal.io/api/namespace/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mlrb/mlrb/workflows"
)

// MinRetention is the shortest namespace retention mlrb is safe with:
// `benchmark resume` starts again any run that visibility no longer
// lists, so a closed run must stay listed for its benchmark's whole life
// (a 24 h budget, up to eval.wait_limit's 72 h parked, and the operator's
// own time to resume). Shorter, a resume re-runs runs that have results.
const MinRetention = 7 * 24 * time.Hour

// DefaultRetention is a new namespace's: a month of closed runs listed.
const DefaultRetention = 30 * 24 * time.Hour

// SetupError is a namespace that is missing or not ready for mlrb: the
// operator's to fix, with the command that does.
type SetupError struct{ Msg string }

func (e *SetupError) Error() string { return e.Msg }

// SetupOptions say what `starter setup` may change.
type SetupOptions struct {
	Create    bool          // register the namespace when it is missing
	Retention time.Duration // its retention when created, or raised to (0: keep)
}

// SetupReport is what setup found and did.
type SetupReport struct {
	Created   bool
	Retention time.Duration
	Added     []string // search attributes registered now
}

// SetupNamespace makes ns ready for mlrb: created when asked, its
// retention raised when asked, mlrb's search attributes registered, and
// all of it read back.
func SetupNamespace(ctx context.Context, c client.Client, ns string, o SetupOptions) (SetupReport, error) {
	var rep SetupReport
	d, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: ns})
	var nf *serviceerror.NamespaceNotFound
	switch {
	case errors.As(err, &nf) && !o.Create:
		return rep, &SetupError{Msg: fmt.Sprintf("namespace %s does not exist: `starter setup --create-namespace --retention %s` creates it", ns, retentionText(MinRetention))}
	case errors.As(err, &nf):
		if o.Retention == 0 {
			o.Retention = DefaultRetention
		}
		_, err = c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
			Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(o.Retention),
			Description: "ML Research Benchmark runs (mlrb)",
		})
		if err != nil && !errors.As(err, new(*serviceerror.NamespaceAlreadyExists)) {
			return rep, fmt.Errorf("create namespace %s: %w", ns, err)
		}
		rep.Created, rep.Retention = true, o.Retention
	case err != nil:
		return rep, fmt.Errorf("describe namespace %s: %w", ns, err)
	default:
		rep.Retention = d.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration()
		if o.Retention > rep.Retention {
			_, err = c.WorkflowService().UpdateNamespace(ctx, &workflowservice.UpdateNamespaceRequest{
				Namespace: ns, Config: &namespacepb.NamespaceConfig{WorkflowExecutionRetentionTtl: durationpb.New(o.Retention)},
			})
			if err != nil {
				return rep, fmt.Errorf("raise namespace %s's retention to %s: %w", ns, o.Retention, err)
			}
			rep.Retention = o.Retention
		}
	}
	rep.Added, err = registerAttributes(ctx, c, ns)
	if err != nil {
		return rep, err
	}
	return rep, CheckNamespace(ctx, c, ns)
}

// registerAttributes adds mlrb's missing search attributes. A namespace
// just created reaches the frontends' caches within seconds, so
// "not found" is retried until a deadline.
func registerAttributes(ctx context.Context, c client.Client, ns string) ([]string, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		missing, wrong, err := missingAttributes(ctx, c, ns)
		if err == nil && len(wrong) > 0 {
			return nil, &SetupError{Msg: strings.Join(wrong, "; ")}
		}
		if err == nil && len(missing) == 0 {
			return nil, nil
		}
		if err == nil {
			add := map[string]enumspb.IndexedValueType{}
			for _, n := range missing {
				add[n] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
			}
			_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: ns, SearchAttributes: add})
			if err == nil || errors.As(err, new(*serviceerror.AlreadyExists)) {
				return missing, nil
			}
		}
		if !notFoundYet(err) || time.Now().After(deadline) {
			return nil, fmt.Errorf("register search attributes in %s: %w", ns, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func notFoundYet(err error) bool {
	return errors.As(err, new(*serviceerror.NamespaceNotFound)) || errors.As(err, new(*serviceerror.NotFound)) ||
		errors.As(err, new(*serviceerror.Unavailable))
}

// missingAttributes lists mlrb's search attributes ns lacks, and those it
// has with another type.
func missingAttributes(ctx context.Context, c client.Client, ns string) (missing, wrong []string, err error) {
	list, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: ns})
	if err != nil {
		return nil, nil, err
	}
	for _, n := range workflows.SearchAttributeNames() {
		t, ok := list.CustomAttributes[n]
		switch {
		case !ok:
			missing = append(missing, n)
		case t != enumspb.INDEXED_VALUE_TYPE_KEYWORD:
			wrong = append(wrong, fmt.Sprintf("search attribute %s is a %s in namespace %s; mlrb needs a Keyword (remove it with `temporal operator search-attribute remove --namespace %s --name %s`, then `starter setup`)",
				n, t, ns, ns, n))
		}
	}
	sort.Strings(missing)
	return missing, wrong, nil
}

// CheckNamespace refuses a namespace mlrb cannot run in: missing, or
// without its search attributes (every run's first workflow task would
// fail until they exist, with nothing but the worker's log saying why).
func CheckNamespace(ctx context.Context, c client.Client, ns string) error {
	missing, wrong, err := missingAttributes(ctx, c, ns)
	var nf *serviceerror.NamespaceNotFound
	switch {
	case errors.As(err, &nf):
		return &SetupError{Msg: fmt.Sprintf("namespace %s does not exist on this cluster: create it with `starter setup --create-namespace --retention %s`", ns, retentionText(MinRetention))}
	case err != nil:
		return fmt.Errorf("list search attributes of namespace %s: %w", ns, err)
	case len(wrong) > 0:
		return &SetupError{Msg: strings.Join(wrong, "; ")}
	case len(missing) > 0:
		cmds := make([]string, len(missing))
		for i, n := range missing {
			cmds[i] = fmt.Sprintf("temporal operator search-attribute create --namespace %s --name %s --type Keyword", ns, n)
		}
		return &SetupError{Msg: fmt.Sprintf("namespace %s lacks mlrb's search attributes %s: run `starter setup` (or: %s)", ns, strings.Join(missing, ", "), strings.Join(cmds, "; "))}
	}
	return nil
}

// retentionText prints a retention the way Temporal's CLI takes it.
func retentionText(d time.Duration) string { return fmt.Sprintf("%dh", int(d.Hours())) }
