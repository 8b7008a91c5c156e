package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode"
	"unicode/utf8"
)

// CheckRequest parses a request body strictly: one JSON object, no key
// twice in any object. The gateway prices a call on the values it reads
// and sends the body on unchanged, so a body in which two decoders could
// read different values (gjson keeps the first of a duplicate key, Go's
// and Python's decoders the last) is never sent.
func CheckRequest(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	t, err := dec.Token()
	if err != nil {
		return fmt.Errorf("the body is not JSON: %w", err)
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return errors.New("the body is not a JSON object")
	}
	if err := object(dec, ""); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("the body holds more than one JSON value")
	}
	return nil
}

// object reads an object's members after its '{', refusing a key twice.
func object(dec *json.Decoder, path string) error {
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return fmt.Errorf("the body is not JSON: %w", err)
		}
		k, _ := t.(string)
		if seen[k] {
			return fmt.Errorf("key %q appears twice in %s: a body two decoders read differently is not sent", k, where(path))
		}
		seen[k] = true
		if err := value(dec, path+"."+k); err != nil {
			return err
		}
	}
	_, err := dec.Token() // '}'
	return err
}

func value(dec *json.Decoder, path string) error {
	t, err := dec.Token()
	if err != nil {
		return fmt.Errorf("the body is not JSON: %w", err)
	}
	d, ok := t.(json.Delim)
	switch {
	case !ok:
		return nil
	case d == '{':
		return object(dec, path)
	case d == '[':
		for i := 0; dec.More(); i++ {
			if err := value(dec, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		_, err := dec.Token() // ']'
		return err
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
