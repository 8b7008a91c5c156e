package runtime

import (
	"bytes"
	"encoding/base64"
	"net/url"
	"strings"
	"testing"
)

const secret = "sk-live-0123456789abcdefXYZ"

func redacted(t *testing.T, writes ...[]byte) string {
	t.Helper()
	var out bytes.Buffer
	w := Redacting(&out, []string{secret})
	for _, p := range writes {
		if _, err := w.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func TestRedactsAcrossTheFlushBoundary(t *testing.T) {
	// A line longer than what is held back, the secret straddling the
	// point where it is cut, in writes that split it too.
	long := bytes.Repeat([]byte("x"), maxLine-3)
	got := redacted(t, long, []byte(secret[:5]), []byte(secret[5:]+" tail\n"))
	if strings.Contains(got, secret[:5]) || strings.Contains(got, secret[5:]) || !strings.Contains(got, "[REDACTED] tail") {
		t.Fatalf("secret leaked across the flush: %q", got[len(got)-80:])
	}
}

func TestRedactsEncodedForms(t *testing.T) {
	for name, line := range map[string]string{
		"url":          "GET /v1?key=" + url.QueryEscape(secret+"/x") + "\n",
		"base64":       "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(secret)) + "\n",
		"base64 off 1": "blob " + base64.StdEncoding.EncodeToString([]byte("u:"+secret)) + "\n",
		"base64 off 2": "blob " + base64.URLEncoding.EncodeToString([]byte("ab"+secret+"!")) + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			got := redacted(t, []byte(line))
			if !strings.Contains(got, "[REDACTED]") {
				t.Fatalf("not masked: %q", got)
			}
			// What is left around the mask cannot give the secret back.
			for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
				if b, err := enc.DecodeString(strings.Fields(got)[len(strings.Fields(got))-1]); err == nil && bytes.Contains(b, []byte(secret[:8])) {
					t.Fatalf("decodes back to the secret: %q", got)
				}
			}
		})
	}
}

// TestRedactsAMultiLineSecretWrittenInPieces is audit #20: a PEM key
// printed a line per write was flushed line by line, and no line held
// the whole secret.
func TestRedactsAMultiLineSecretWrittenInPieces(t *testing.T) {
	pem := "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n-----END PRIVATE KEY-----"
	var out bytes.Buffer
	w := Redacting(&out, []string{pem})
	for _, line := range strings.Split(pem, "\n") {
		_, _ = w.Write([]byte(line + "\n"))
	}
	_ = w.Close()
	if strings.Contains(out.String(), "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC") || strings.Contains(out.String(), "BKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj") {
		t.Fatalf("the key's lines leaked: %q", out.String())
	}
}
