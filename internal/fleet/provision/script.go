// Boot scripts from deploy/ filled in, and the shell quoting they use.

package provision

import (
	"fmt"
	"strings"
	"text/template"
)

// render fills a boot script from deploy/ with values, quoting with q.
func render(name, text string, values any) (string, error) {
	t, err := template.New(name).Funcs(template.FuncMap{"q": shellQuote}).Parse(text)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	var b strings.Builder
	if err := t.Execute(&b, values); err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return b.String(), nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}
