// Dialling the Temporal frontend, and saying why it could not be used.

package app

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc/codes"

	"github.com/mlrb/mlrb/config"
)

// ConnectKind says why the frontend could not be used: an operator fixes
// an unreachable address, a TLS mismatch and refused credentials in
// different places.
type ConnectKind int

// The ways a dial fails.
const (
	Unreachable ConnectKind = iota // nothing answered
	TLSFailed                      // the handshake failed, or one side spoke TLS and the other did not
	AuthRefused                    // the frontend refused the credentials
)

// ConnectError says the Temporal server could not be reached or would
// not talk to this client, and what to change.
type ConnectError struct {
	Address string
	Kind    ConnectKind
	Err     error
	Hint    string
}

func (e *ConnectError) Error() string {
	switch e.Kind {
	case TLSFailed:
		return fmt.Sprintf("TLS with Temporal at %s failed: %v; %s", e.Address, e.Err, e.Hint)
	case AuthRefused:
		return fmt.Sprintf("Temporal at %s refused this client's credentials: %v; %s", e.Address, e.Err, e.Hint)
	}
	return fmt.Sprintf("cannot reach Temporal at %s (temporal.address, MLRB_TEMPORAL_ADDRESS): %v; start one with `worker --dev` or point temporal.address at your cluster", e.Address, e.Err)
}

func (e *ConnectError) Unwrap() error { return e.Err }

// connectError names why a dial failed. The SDK reports a TLS failure
// only as text in its gRPC error, so the classes are read off the text.
func connectError(t config.Temporal, err, dctxErr error) *ConnectError {
	e := &ConnectError{Address: t.Address, Err: err}
	msg := err.Error()
	code := serviceerror.ToStatus(err).Code()
	switch {
	case code == codes.Unauthenticated || code == codes.PermissionDenied:
		e.Kind = AuthRefused
		e.Hint = "check temporal.api_key, or the client certificate in temporal.tls.cert_file, against what the cluster's authorizer accepts"
	case strings.Contains(msg, "x509:") || strings.Contains(msg, "tls: ") || strings.Contains(msg, "handshake"):
		e.Kind = TLSFailed
		e.Hint = tlsHint(t, msg)
	case t.UsesTLS() && t.TLS.CertFile == "" && closedEarly(msg):
		e.Kind = TLSFailed
		e.Hint = "the frontend closed the connection during TLS: a cluster secured with mutual TLS needs a client certificate (temporal.tls.cert_file and temporal.tls.key_file)"
	case !t.UsesTLS() && (strings.Contains(msg, "server preface") || closedEarly(msg)):
		e.Kind = TLSFailed
		e.Hint = "the frontend closed a plaintext connection: if it serves TLS, set temporal.tls.ca_file (a private CA) or temporal.tls.enabled (public roots)"
	case errors.Is(dctxErr, context.DeadlineExceeded):
		e.Err = fmt.Errorf("no answer within %s (temporal.connect_timeout)", t.ConnectTimeout)
	}
	return e
}

func tlsHint(t config.Temporal, msg string) string {
	switch {
	case strings.Contains(msg, "certificate required") || strings.Contains(msg, "bad certificate"):
		return "the frontend wants a client certificate it trusts: set temporal.tls.cert_file and temporal.tls.key_file to one signed by the CA the cluster requires"
	case strings.Contains(msg, "unknown authority"):
		return "the frontend's certificate is signed by a CA this host does not trust: set temporal.tls.ca_file to that CA's PEM file"
	case strings.Contains(msg, "certificate is valid for") || strings.Contains(msg, "doesn't contain any IP SANs"):
		return "the frontend's certificate does not name the address dialed: set temporal.tls.server_name to a name it holds"
	case !t.UsesTLS():
		return "the frontend expects TLS: set temporal.tls.ca_file or temporal.tls.enabled"
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		return "the frontend speaks plaintext: unset temporal.tls.* and temporal.api_key, or enable TLS on the cluster"
	}
	return "check temporal.tls.ca_file, temporal.tls.server_name and the client certificate"
}

// closedEarly tells a connection the far side dropped before answering.
func closedEarly(msg string) bool {
	for _, s := range []string{"broken pipe", "connection reset", "EOF"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// OutageError is a call the frontend accepted but the cluster behind it
// could not serve: its history or matching service, or its database, is
// down or restarting. Runs are unharmed; they wait for it.
type OutageError struct{ Err error }

func (e *OutageError) Error() string {
	return fmt.Sprintf("Temporal did not serve the call (%v): its history or matching service or its database is down or restarting; "+
		"the runs are safe, they wait and go on where they were once it is back; try again then (`temporal operator cluster health`)", e.Err)
}

func (e *OutageError) Unwrap() error { return e.Err }

// ExplainOutage names a cluster outage in err, or returns err as it is.
func ExplainOutage(err error) error {
	if err == nil || errors.As(err, new(*ConnectError)) || errors.As(err, new(*OutageError)) {
		return err
	}
	if IsOutage(err) {
		return &OutageError{Err: err}
	}
	return err
}

// IsOutage tells whether err is the cluster's answer that it could not
// serve a call (OutageError's cause): worth waiting out, as runs do.
func IsOutage(err error) bool {
	// Only a Temporal call's answer: the SDK turns gRPC statuses into
	// these, while a store's or a command's own timeout is not the cluster's.
	return errors.As(err, new(*OutageError)) || errors.As(err, new(*serviceerror.DeadlineExceeded)) || errors.As(err, new(*serviceerror.Unavailable))
}
