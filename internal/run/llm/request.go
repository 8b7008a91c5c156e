// An LLM request body parsed strictly.

package llm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"unicode"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// CheckRequest parses a request body strictly: one JSON object, no key
// twice in any object. The gateway prices a call on the values it reads
// and sends the body on unchanged, so a body in which two decoders could
// read different values (gjson keeps the first of a duplicate key, Go's
// and Python's decoders the last) is never sent.
//
// The body is walked token by token in place (jsontext parses a
// bytes.Buffer without a copy, and no string value is ever made): a
// 32 MiB body costs no memory past its own.
func CheckRequest(body []byte) error {
	dec := jsontext.NewDecoder(bytes.NewBuffer(body), jsontext.AllowDuplicateNames(true))
	if dec.PeekKind() != '{' {
		if _, err := dec.ReadToken(); err != nil {
			return fmt.Errorf("the body is not JSON: %w", err)
		}
		return errors.New("the body is not a JSON object")
	}
	if _, err := dec.ReadToken(); err != nil {
		return fmt.Errorf("the body is not JSON: %w", err)
	}
	if err := object(dec, ""); err != nil {
		return err
	}
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		return errors.New("the body holds more than one JSON value")
	}
	return nil
}

// object reads an object's members after its '{', refusing a key twice.
func object(dec *jsontext.Decoder, path string) error {
	seen := map[string]bool{}
	for dec.PeekKind() != '}' {
		t, err := dec.ReadToken()
		if err != nil {
			return fmt.Errorf("the body is not JSON: %w", err)
		}
		k := t.String()
		if seen[k] {
			return fmt.Errorf("key %q appears twice in %s: a body two decoders read differently is not sent", k, where(path))
		}
		seen[k] = true
		if err := value(dec, path+"."+k); err != nil {
			return err
		}
	}
	return readToken(dec) // '}'
}

func value(dec *jsontext.Decoder, path string) error {
	switch dec.PeekKind() {
	case '{':
		if err := readToken(dec); err != nil {
			return err
		}
		return object(dec, path)
	case '[':
		if err := readToken(dec); err != nil {
			return err
		}
		for i := 0; dec.PeekKind() != ']'; i++ {
			if err := value(dec, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return readToken(dec) // the value, or the array's ']'
}

// readToken reads a token, a string's without making it.
func readToken(dec *jsontext.Decoder) error {
	if _, err := dec.ReadToken(); err != nil {
		return fmt.Errorf("the body is not JSON: %w", err)
	}
	return nil
}

func where(path string) string {
	if path == "" {
		return "the body"
	}
	return path[1:]
}

// MaxModelName bounds a model name: longer, or with control characters,
// it is no model any provider serves, and it would ride in every record
// and ledger after it.
const MaxModelName = 256

// CheckModelName refuses a model name no provider has.
func CheckModelName(name string) error {
	switch {
	case name == "":
		return errors.New("the request names no model")
	case len(name) > MaxModelName || !utf8.ValidString(name):
		return fmt.Errorf("a model name is at most %d bytes of UTF-8", MaxModelName)
	}
	for _, r := range name {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return errors.New("a model name has no spaces or control characters")
		}
	}
	return nil
}

// Shorten cuts an agent-chosen name for a record: at most n bytes, valid
// UTF-8, marked when cut.
func Shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
