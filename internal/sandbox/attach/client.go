// The person's side of an attach: `starter attach` in their terminal.

package attach

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// Terminal is the person's side: what they type, where the session shows,
// its size now and as it changes.
type Terminal struct {
	In     io.Reader
	Out    io.Writer
	Size   Size
	Resize <-chan Size
	Term   string
}

// PinnedTLS is a client's TLS to an endpoint: its certificate must be the
// one pinned (self-signed by its worker), whatever names it carries.
func PinnedTLS(pin string) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		InsecureSkipVerify: true, // verified below, by pin, not by name
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the worker showed no certificate")
			}
			sum := sha256.Sum256(cs.PeerCertificates[0].Raw)
			if hex.EncodeToString(sum[:]) != pin {
				return errors.New("the worker's certificate is not the one in the credential: not attaching")
			}
			return nil
		},
	}
}

// Attach carries t to the run cred opens until the session ends, and
// returns why it ended as the worker said. A run that goes on at another
// host is followed there (its endpoint as the worker named it).
func Attach(ctx context.Context, cred Credential, t Terminal) (string, error) {
	ep := cred.Via
	for hop := 0; hop < 4; hop++ {
		why, next, err := attachOnce(ctx, cred, ep, t)
		if err != nil || next == nil {
			return why, err
		}
		if !cred.Allows(next.Pin) {
			return "", fmt.Errorf("the worker sent you on to %s, an endpoint this credential does not know (it was given %d when invited, on a static fleet): not attaching there; ask for a new invitation", next.Addr, len(cred.Pins)+1)
		}
		ep = *next
	}
	return "", errors.New("the run moved between hosts too often: attach again")
}

func attachOnce(ctx context.Context, cred Credential, ep Endpoint, t Terminal) (string, *Endpoint, error) {
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 20 * time.Second}, Config: PinnedTLS(ep.Pin)}
	c, err := d.DialContext(ctx, "tcp", ep.Addr)
	if err != nil {
		return "", nil, fmt.Errorf("attach through %s: %w", ep.Addr, err)
	}
	defer func() { _ = c.Close() }()
	hello, _ := json.Marshal(Hello{Run: cred.Run, Token: cred.Token, Size: t.Size, Term: t.Term})
	if _, err := c.Write(append(hello, '\n')); err != nil {
		return "", nil, fmt.Errorf("attach through %s: %w", ep.Addr, err)
	}
	done := make(chan struct{})
	defer close(done)
	go func() { // keystrokes and resizes to the worker
		buf := make([]byte, 4096)
		for {
			n, err := t.In.Read(buf)
			if n > 0 && writeFrame(c, frameData, bytes.Clone(buf[:n])) != nil {
				return
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		for {
			select {
			case s := <-t.Resize:
				b, _ := json.Marshal(s)
				if writeFrame(c, frameResize, b) != nil {
					return
				}
			case <-done:
				return
			}
		}
	}()
	go func() {
		select {
		case <-ctx.Done():
			_ = c.Close()
		case <-done:
		}
	}()
	for {
		kind, p, err := readFrame(c)
		if err != nil {
			return "", nil, fmt.Errorf("the worker's connection ended: %w", err)
		}
		switch kind {
		case frameData:
			if _, err := t.Out.Write(p); err != nil {
				return "", nil, err
			}
		case frameEnd:
			return string(p), nil, nil
		case frameRedirect:
			var next Endpoint
			if err := json.Unmarshal(p, &next); err != nil || next.Addr == "" {
				return "", nil, errors.New("the worker named no host to go on at")
			}
			return "", &next, nil
		}
	}
}
