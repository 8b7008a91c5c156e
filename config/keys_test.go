package config

import (
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// leafFields lists the Go paths of Config's leaf fields ("Storage.S3.Bucket").
func leafFields(t reflect.Type, prefix string) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		p := prefix + f.Name
		if f.Type.Kind() == reflect.Struct {
			out = append(out, leafFields(f.Type, p+".")...)
		} else {
			out = append(out, p)
		}
	}
	return out
}

// TestEveryKeyHasAFieldAndEveryFieldAKey: the table and the struct
// describe the same keys; a key without a field is accepted and ignored.
func TestEveryKeyHasAFieldAndEveryFieldAKey(t *testing.T) {
	byField := map[string]string{}
	for _, k := range Table {
		p := fieldPath(k.Name)
		if p == "" {
			t.Errorf("key %s is accepted but no Config field takes it", k.Name)
			continue
		}
		if prev, dup := byField[p]; dup {
			t.Errorf("keys %s and %s both decode into %s", prev, k.Name, p)
		}
		byField[p] = k.Name
		if k.Doc == "" {
			t.Errorf("key %s has no meaning in the table", k.Name)
		}
	}
	for _, f := range leafFields(reflect.TypeOf(Config{}), "") {
		if _, ok := byField[f]; !ok {
			t.Errorf("Config.%s has no key in the table", f)
		}
	}
	flags := map[string]string{}
	for _, k := range Table {
		if k.Flag == "" {
			continue
		}
		if prev, dup := flags[k.Flag]; dup {
			t.Errorf("flag --%s sets both %s and %s", k.Flag, prev, k.Name)
		}
		flags[k.Flag] = k.Name
	}
}

// TestEveryKeyIsRead: each key's field is read by code outside the
// config package's own loading and validation; a key nobody reads is
// accepted and silently does nothing.
func TestEveryKeyIsRead(t *testing.T) {
	var files []string
	root := filepath.Join("..")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && p != root || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || filepath.Dir(p) == "." {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files = append(files, string(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The config package's own readers (StateDir, BlobRoot, WorkDir)
	// count; its loading, validation and the table do not.
	own, err := os.ReadFile("config.go")
	if err != nil {
		t.Fatal(err)
	}
	s := string(own)
	if i := strings.Index(s, "func (c *Config) Validate()"); i >= 0 {
		j := strings.Index(s[i:], "\n}\n")
		s = s[:i] + s[i+j:]
	}
	files = append(files, s)
	for _, k := range Table {
		if fieldPath(k.Name) == "" {
			continue // TestEveryKeyHasAFieldAndEveryFieldAKey names it
		}
		parts := strings.Split(fieldPath(k.Name), ".")
		parent, field := parts[len(parts)-2], parts[len(parts)-1]
		read := false
		for _, code := range files {
			if reads(code, parent, field) {
				read = true
				break
			}
		}
		if !read {
			t.Errorf("key %s is accepted but nothing reads .%s.%s", k.Name, parent, field)
		}
	}
}

// reads tells whether code reads parent.field: as a selector, or through
// a local alias of the parent (s := cfg.Storage.S3; s.Bucket).
func reads(code, parent, field string) bool {
	if strings.Contains(code, "."+parent+"."+field) {
		return true
	}
	for _, m := range alias.FindAllStringSubmatch(code, -1) {
		if m[2] == parent && regexp.MustCompile(`\b`+m[1]+`\.`+field+`\b`).MatchString(code) {
			return true
		}
	}
	return false
}

var alias = regexp.MustCompile(`(\w+) := \w+(?:\.\w+)*\.(\w+)\n`)

// TestReadmeTableIsTheKeyTable: the configuration page documents exactly the keys
// accepted, as `starter config keys` prints them.
func TestReadmeTableIsTheKeyTable(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "operate", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	start := strings.Index(readme, "-->\n| key |")
	end := strings.Index(readme, "<!-- /config-table -->")
	if start < 0 || end < start {
		t.Fatal("docs/operate/configuration.md has no generated config table (<!-- config-table --> … <!-- /config-table -->)")
	}
	if got := readme[start+4 : end]; got != Markdown() {
		t.Fatalf("docs/operate/configuration.md's config table is not the key table; regenerate it with `go run ./starter config keys`.\nthe page:\n%s\ntable:\n%s", got, Markdown())
	}
	documented := map[string]bool{}
	for _, line := range strings.Split(readme, "\n") {
		if strings.HasPrefix(line, "| `") {
			name := strings.Trim(strings.SplitN(line[2:], "|", 2)[0], " `")
			documented[name] = true
		}
	}
	accepted := map[string]bool{}
	for _, k := range Keys() {
		accepted[k] = true
		if !documented[k] {
			t.Errorf("key %s is accepted but not documented in docs/operate/configuration.md", k)
		}
	}
	for name := range documented {
		if strings.Contains(name, ".") && !strings.Contains(name, " ") && strings.ToLower(name) == name && !accepted[name] && looksLikeKey(name) {
			t.Errorf("docs/operate/configuration.md documents %s, which is not accepted", name)
		}
	}
}

// looksLikeKey tells a config key from other dotted names in the configuration page
// tables (files such as submission.json).
func looksLikeKey(name string) bool {
	sections := map[string]bool{}
	for _, k := range Table {
		sections[strings.SplitN(k.Name, ".", 2)[0]] = true
	}
	return sections[strings.SplitN(name, ".", 2)[0]]
}
