package attach

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

// fakeRuns answers for one run, as Temporal would.
type fakeRuns struct {
	invites []Invite
	where   Whereabouts
}

func (f *fakeRuns) Invites(context.Context, string) ([]Invite, error)  { return f.invites, nil }
func (f *fakeRuns) Where(context.Context, string) (Whereabouts, error) { return f.where, nil }
func (f *fakeRuns) Resume(context.Context, string) error               { return nil }

// serve starts an attach server for host on loopback.
func serve(t *testing.T, host string, runs Runs, peers func(context.Context, string) (Endpoint, bool)) Endpoint {
	t.Helper()
	tlsCfg, pin, err := Identity(t.TempDir(), host)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{HostID: host, Rooms: &Rooms{}, Runs: runs, Peers: peers, TLS: tlsCfg, Log: zap.NewNop(), Poll: 10 * time.Millisecond}
	go func() { _ = s.Serve(l) }()
	t.Cleanup(func() { _ = s.Close() })
	return Endpoint{Addr: l.Addr().String(), Pin: pin}
}

// TestAttachRefusesAndFollows: a token that is not one of the run's
// invitations is refused; a worker with another certificate than the
// credential pins is not talked to; a run that goes on at another host
// is followed there, pinned to that host's certificate, if the
// credential was given it.
func TestAttachRefusesAndFollows(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := serve(t, "host-b", &fakeRuns{invites: []Invite{{Hash: HashToken("tok"), Label: "alice"}}, where: Whereabouts{Phase: "done", Ended: true}}, nil)
	a := serve(t, "host-a", &fakeRuns{invites: []Invite{{Hash: HashToken("tok"), Label: "alice"}}, where: Whereabouts{Phase: "running", Host: "host-b"}},
		func(_ context.Context, id string) (Endpoint, bool) { return b, id == "host-b" })
	term := func() Terminal {
		return Terminal{In: strings.NewReader(""), Out: &bytes.Buffer{}, Size: Size{Cols: 80, Rows: 24}}
	}
	why, err := Attach(ctx, Credential{Run: "r", Token: "other", Via: a}, term())
	if err != nil || !strings.Contains(why, "refused") {
		t.Fatalf("a wrong token: %q %v", why, err)
	}
	if _, err := Attach(ctx, Credential{Run: "r", Token: "tok", Via: Endpoint{Addr: a.Addr, Pin: b.Pin}}, term()); err == nil || !strings.Contains(err.Error(), "not the one in the credential") {
		t.Fatalf("a worker with another certificate: %v", err)
	}
	// Audit L5: an endpoint the credential was not given is not followed
	// (the token never leaves for it); one it was given is.
	if _, err := Attach(ctx, Credential{Run: "r", Token: "tok", Via: a}, term()); err == nil || !strings.Contains(err.Error(), "does not know") {
		t.Fatalf("sent on to an endpoint not in the credential: %v", err)
	}
	why, err = Attach(ctx, Credential{Run: "r", Token: "tok", Via: a, Pins: []string{a.Pin, b.Pin}}, term())
	if err != nil || why != "the run has ended" {
		t.Fatalf("followed to host-b: %q %v", why, err)
	}
}
