package mlrb_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// filesPage is the map of every file, generated from the files' opening
// lines and the wings' docs.
const filesPage = "docs/develop/files.md"

// openingLine is what a file's first comment says it holds: the first
// sentence of its leading comment ("" : it opens with none).
func openingLine(src string) string {
	var lines []string
	for _, l := range strings.Split(src, "\n") {
		text, ok := strings.CutPrefix(l, "// ")
		if !ok || strings.HasPrefix(l, "//go:") {
			break
		}
		lines = append(lines, text)
	}
	s := strings.Join(strings.Fields(strings.Join(lines, " ")), " ")
	if i := strings.Index(s, ". "); i > 0 {
		s = s[:i+1]
	}
	return s
}

// sourceFiles are a package dir's non-test Go files, whatever their
// build constraints.
func sourceFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if n := e.Name(); !e.IsDir() && strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			out = append(out, n)
		}
	}
	return out
}

// packageDirs are the module's packages, as paths relative to its root.
func packageDirs(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, _ := os.Getwd()
	var dirs []string
	for _, d := range strings.Fields(string(out)) {
		rel, _ := filepath.Rel(root, d)
		dirs = append(dirs, filepath.ToSlash(rel))
	}
	return dirs
}

// embeddedBy names the files of dir another of its files embeds
// (//go:embed), by the file that does: their bytes are data, hashed as
// they are (the reference evaluator's scoring code is its identity), so
// they carry no line of ours.
func embeddedBy(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range sourceFiles(t, dir) {
		src, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(src), "\n") {
			if names, ok := strings.CutPrefix(l, "//go:embed "); ok {
				for _, n := range strings.Fields(names) {
					out[n] = f
				}
			}
		}
	}
	return out
}

// lineOf is a file's line on the map.
func lineOf(t *testing.T, dir, f string, embedded map[string]string) string {
	t.Helper()
	if by, ok := embedded[f]; ok && strings.HasSuffix(f, ".go") {
		return fmt.Sprintf("(embedded by `%s`: its bytes are data, hashed as they are, so it opens with no line of the map's)", by)
	}
	src, err := os.ReadFile(filepath.Join(dir, f))
	if err != nil {
		t.Fatal(err)
	}
	return openingLine(string(src))
}

// TestEveryFileSaysWhatItHolds: each non-test file opens with a line
// saying what it holds, which the file map is made of.
func TestEveryFileSaysWhatItHolds(t *testing.T) {
	for _, dir := range packageDirs(t) {
		embedded := embeddedBy(t, dir)
		for _, f := range sourceFiles(t, dir) {
			if _, ok := embedded[f]; ok {
				continue
			}
			if line := lineOf(t, dir, f, embedded); len(strings.Fields(line)) < 3 {
				t.Errorf("%s/%s opens with no line saying what it holds (a `// …` sentence before anything else, then a blank line)", dir, f)
			}
		}
	}
}

// section is a group of the map: a room on its floor, the vocabulary,
// the binaries, what stands beside the house.
func section(pkg string, floor map[string]int) (int, string) {
	if r := roomOf(pkg); r != "" {
		return floor[r], fmt.Sprintf("Floor %d: `%s`", floor[r], r)
	}
	switch {
	case vocabularyOf(pkg) != "":
		return 0, "The vocabulary: `tasks`, `config`, `deploy`, `agents`"
	case strings.HasPrefix(pkg, "internal/testkit"):
		return 200, "Beside the house: `internal/testkit` (tests and benchmarks only)"
	case pkg == ".":
		return 201, "The module's root: its layout and staircase tests"
	}
	return 100, "The binaries and benches: `worker`, `starter`, `cmd/mlrb-agent`, `bench`"
}

// fileMap is the page: every package by floor, every file with its line.
func fileMap(t *testing.T) string {
	floor := map[string]int{}
	for _, r := range rooms {
		floor[r] = floorOf(t, filepath.FromSlash(r))
	}
	dirs := packageDirs(t)
	slices.SortStableFunc(dirs, func(a, b string) int {
		fa, _ := section(a, floor)
		fb, _ := section(b, floor)
		if fa != fb {
			return fa - fb
		}
		return strings.Compare(a, b)
	})
	var b strings.Builder
	b.WriteString("# Every file, by floor\n\n<!-- generated from each file's opening line and the wings' doc.go: MLRB_UPDATE_DOCS=1 go test -run TestFileMap . -->\n\n")
	b.WriteString("Each non-test file opens with a line saying what it holds; this page is those lines, package by package, the wings in the staircase's order (ground first; see [the layout](layout.md)). Search it for a word.\n")
	last := ""
	for _, dir := range dirs {
		if _, title := section(dir, floor); title != last {
			fmt.Fprintf(&b, "\n## %s\n", title)
			last = title
		}
		fmt.Fprintf(&b, "\n### `%s`\n\n| file | what it holds |\n|---|---|\n", dir)
		embedded := embeddedBy(t, dir)
		for _, f := range sourceFiles(t, dir) {
			fmt.Fprintf(&b, "| `%s` | %s |\n", f, strings.ReplaceAll(lineOf(t, dir, f, embedded), "|", `\|`))
		}
	}
	return b.String()
}

// TestFileMap: the file map is what the files say, regenerated
// (MLRB_UPDATE_DOCS=1) whenever a file or its opening line changes.
func TestFileMap(t *testing.T) {
	want := fileMap(t)
	if os.Getenv("MLRB_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(filesPage, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(filesPage)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s is not the files' opening lines; regenerate it: MLRB_UPDATE_DOCS=1 go test -run TestFileMap .", filesPage)
	}
}
