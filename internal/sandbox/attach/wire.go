// The wire between `starter attach` and a worker's attach server, over TLS pinned to the worker's certificate.

package attach

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// The wire between `starter attach` and a worker's attach server, over
// TLS pinned to the worker's certificate: the client sends a Hello line,
// then both sides send frames of a type byte, a 4-byte big-endian length
// and the payload.
const (
	frameData     = 'd' // keystrokes in, terminal output out
	frameResize   = 'r' // a Size, client to server
	frameEnd      = 'x' // why the session ends, server to client
	frameRedirect = 'g' // an Endpoint to go on at, server to client
	maxFrame      = 1 << 20
)

// Hello is the client's first line: which run, its credential's token and
// the terminal.
type Hello struct {
	Run   string `json:"run"`
	Token string `json:"token"`
	Size
	Term string `json:"term,omitempty"`
}

// Size is a terminal's size.
type Size struct {
	Cols uint `json:"cols"`
	Rows uint `json:"rows"`
}

// ok tells a terminal size a person's could be.
func (s Size) ok() bool { return s.Cols > 0 && s.Rows > 0 && s.Cols < 10000 && s.Rows < 10000 }

// Endpoint is where a worker's attach server answers: its address and
// the SHA-256 of its certificate (hex), which clients pin.
type Endpoint struct {
	Addr string `json:"addr"`
	Pin  string `json:"pin"`
}

// Credential is what an operator gives a person: the run, a token of its
// invitations, and a worker to attach through.
type Credential struct {
	Run   string   `json:"run"`
	Token string   `json:"token"`
	Via   Endpoint `json:"via"`
	// Pins are the attach endpoints (their certificates' SHA-256) the
	// person may be sent on to, as the operator's store listed them at
	// the invitation: on a static fleet, a worker that registers later,
	// or names an endpoint of its own choosing, never receives the token.
	Pins []string `json:"pins,omitempty"`
	// Provisioned: the fleet provisions a host per attempt (Slurm, EC2),
	// so the run's host comes up after the invitation and is followed to
	// wherever the pinned worker says it is (the store's host records,
	// which its workers write, are the only record of those hosts).
	Provisioned bool `json:"provisioned,omitempty"`
}

// Allows tells whether the credential may be taken to an endpoint of pin.
func (c Credential) Allows(pin string) bool {
	return c.Provisioned || pin == c.Via.Pin || slices.Contains(c.Pins, pin)
}

const credentialPrefix = "mlrb-attach:"

// String is the credential as one word to paste.
func (c Credential) String() string {
	b, _ := json.Marshal(c) // strings only: never fails
	return credentialPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// ParseCredential reads a credential printed by `starter invite`.
func ParseCredential(s string) (Credential, error) {
	var c Credential
	raw, ok := strings.CutPrefix(strings.TrimSpace(s), credentialPrefix)
	if !ok {
		return c, fmt.Errorf("a credential starts with %q (as `starter invite` prints it)", credentialPrefix)
	}
	b, err := base64.RawURLEncoding.DecodeString(raw)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil || c.Run == "" || c.Token == "" || c.Via.Addr == "" || c.Via.Pin == "" {
		return c, fmt.Errorf("the credential is damaged (copy it whole, as `starter invite` printed it)")
	}
	return c, nil
}

// Invite is an invitation as the run keeps it: the token's hash, never
// the token, and the person's label.
type Invite struct {
	Hash  string `json:"hash"`
	Label string `json:"label"`
}

// HashToken is the hash a run keeps of a token.
func HashToken(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// Match is the invitation a token is one of (nil: none).
func Match(invites []Invite, token string) *Invite {
	h := HashToken(token)
	for i := range invites {
		if subtle.ConstantTimeCompare([]byte(invites[i].Hash), []byte(h)) == 1 {
			return &invites[i]
		}
	}
	return nil
}

func writeFrame(w io.Writer, kind byte, payload []byte) error {
	hdr := [5]byte{kind}
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(payload)))
	if _, err := w.Write(append(hdr[:], payload...)); err != nil {
		return err
	}
	return nil
}

func readFrame(r io.Reader) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxFrame {
		return 0, nil, fmt.Errorf("a frame of %d bytes: at most %d", n, maxFrame)
	}
	p := make([]byte, n)
	_, err := io.ReadFull(r, p)
	return hdr[0], p, err
}
