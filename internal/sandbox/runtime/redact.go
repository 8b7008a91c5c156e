// redactor masks secret values in what passes through.

package runtime

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/url"
	"strings"
	"sync"
)

// redactor masks secret values in what passes through: each value as it
// is and in the forms a tool may print it in (base64 at any alignment,
// URL-encoded). Output goes out line by line, and a line too long to hold
// goes out all but a tail as long as the longest form, so a value is never
// split across two writes unseen.
type redactor struct {
	mu    sync.Mutex
	w     io.Writer
	forms [][]byte
	keep  int // the longest form, less one: a value cut at the end fits in it
	buf   []byte
}

// maxLine is how much of a line without a newline is held back.
const maxLine = 1 << 20

// minForm is the shortest encoded form masked: shorter runs of base64
// characters turn up in any log.
const minForm = 8

// Redacting wraps w; with no secrets it returns w itself.
func Redacting(w io.Writer, secrets []string) io.WriteCloser {
	r := &redactor{w: w}
	for _, s := range secrets {
		if s == "" {
			continue
		}
		for _, f := range forms(s) {
			r.forms = append(r.forms, []byte(f))
			r.keep = max(r.keep, len(f)-1)
		}
	}
	return r
}

// forms lists how a secret may appear: itself, URL-encoded, and the part
// of its base64 encodings (standard and URL alphabets) that depends on
// the secret alone, for each of the three offsets it may start at in an
// encoded stream.
func forms(s string) []string {
	out := []string{s}
	add := func(f string) {
		if len(f) >= minForm && f != s {
			out = append(out, f)
		}
	}
	add(url.QueryEscape(s))
	// A multi-line secret (a PEM key, a service account's JSON) is printed
	// a line at a time, and lines are flushed one by one: each of its
	// lines is masked on its own.
	if strings.Contains(s, "\n") {
		for _, line := range strings.Split(s, "\n") {
			add(strings.TrimSpace(line))
		}
	}
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		for off := 0; off < 3; off++ {
			// Each group of four characters encodes three bytes: keep the
			// groups made of the secret's bytes only, not those that mix in
			// what comes before or after it.
			e := enc.EncodeToString(append(make([]byte, off), s...))
			first, end := (off+2)/3, (off+len(s))/3
			if end > first {
				add(e[4*first : 4*end])
			}
		}
	}
	return out
}

var mask = []byte("[REDACTED]")

func (r *redactor) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = append(r.buf, p...)
	i := bytes.LastIndexByte(r.buf, '\n')
	switch {
	case i >= 0:
		i++ // whole lines go out
	case len(r.buf) >= maxLine:
		r.buf = r.masked(r.buf)
		i = len(r.buf) - r.keep // all but a tail that may hold the start of a secret
	default:
		return len(p), nil
	}
	if i <= 0 {
		return len(p), nil
	}
	if _, err := r.w.Write(r.masked(r.buf[:i])); err != nil {
		return 0, err
	}
	r.buf = append(r.buf[:0], r.buf[i:]...)
	return len(p), nil
}

func (r *redactor) masked(b []byte) []byte {
	for _, f := range r.forms {
		b = bytes.ReplaceAll(b, f, mask)
	}
	return b
}

// Close writes what is left of the last line.
func (r *redactor) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.buf) == 0 {
		return nil
	}
	_, err := r.w.Write(r.masked(r.buf))
	r.buf = nil
	return err
}
