// ForTerminal wraps w so that, when it is a terminal, the control characters in what an agent wrote (escape sequences that move the cursor, rewrite the.

package cli

import (
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"
)

// ForTerminal wraps w so that, when it is a terminal, the control
// characters in what an agent wrote (escape sequences that move the
// cursor, rewrite the title, reprogram the terminal) are shown as \xNN
// and never obeyed; newlines and tabs pass. Piped to a file, the bytes go
// through as they are.
func ForTerminal(w io.Writer) io.Writer {
	if f, ok := w.(*os.File); !ok || !IsTerminal(f) {
		return w
	}
	return printableWriter{w}
}

// IsTerminal tells whether f is a terminal (not a pipe or a file).
func IsTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

type printableWriter struct{ w io.Writer }

func (p printableWriter) Write(b []byte) (int, error) {
	if _, err := io.WriteString(p.w, Printable(string(b))); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Printable shows the control characters of s (all but newline and tab)
// as \xNN: agent-chosen text (file names, errors quoting them, log lines)
// printed to an operator's terminal.
func Printable(s string) string {
	if strings.IndexFunc(s, control) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if control(r) {
			fmt.Fprintf(&b, `\x%02x`, r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func control(r rune) bool {
	return (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r < 0xa0)
}
