package mlrb_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestLayoutNamesEveryPackage: the layout page (docs/develop/layout.md),
// where a newcomer looks first, names every package `go list ./...`
// finds (in a row of its own, or by its name in its parent's row), and
// every row it has is a package or a folder of them.
func TestLayoutNamesEveryPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	layout, err := os.ReadFile(filepath.Join("docs", "develop", "layout.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{} // a row's package, without its slash, to the row
	name := regexp.MustCompile("`([^`]+)`")
	for _, line := range strings.Split(string(layout), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		for _, m := range name.FindAllStringSubmatch(cells[1], -1) {
			rows[strings.TrimSuffix(m[1], "/")] = line
		}
	}
	packages := map[string]bool{}
	for _, pkg := range strings.Fields(string(out)) {
		packages[strings.TrimPrefix(strings.TrimPrefix(pkg, "github.com/mlrb/mlrb"), "/")] = true
	}
	// Every row is a package, or a folder of them.
	for row := range rows {
		if packages[row] || slices.ContainsFunc(slices.Collect(maps.Keys(packages)), func(p string) bool { return strings.HasPrefix(p, row+"/") }) {
			continue
		}
		t.Errorf("the layout names %s, which is no package: remove its row", row)
	}
	for _, pkg := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(strings.TrimPrefix(pkg, "github.com/mlrb/mlrb"), "/")
		if rel == "" {
			continue
		}
		if _, ok := rows[rel]; ok {
			continue
		}
		if row, ok := rows[path.Dir(rel)]; ok && strings.Contains(row, "`"+path.Base(rel)+"`") {
			continue
		}
		t.Errorf("docs/develop/layout.md names no %s: add a row (or name it in its parent's)", rel)
	}
}

// TestSizes: no non-test Go file over 400 lines, and no function over 60
// in the packages a newcomer reads first (the workflows, the activities,
// the worker's assembly, the CLI).
func TestSizes(t *testing.T) {
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && strings.HasPrefix(d.Name(), ".") && p != ".":
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || strings.Contains(p, "testdata"):
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if n := strings.Count(string(b), "\n"); n > 400 {
			t.Errorf("%s: %d lines, over 400", p, n)
		}
		if !slices.Contains([]string{"workflows", "activities", "internal/process/app", "starter"}, filepath.Dir(p)) {
			return nil
		}
		f, err := parser.ParseFile(fset, p, b, 0)
		if err != nil {
			return err
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok {
				if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > 60 {
					t.Errorf("%s: %s is %d lines, over 60", p, fn.Name.Name, n)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAgentBinaryStaysSmall: mlrb-agent starts for every agent and every
// evaluation of the built-in suites, so its package initialisation is
// paid a few times a run; nothing of the worker (Temporal, the blob
// store's AWS SDK, the gateway, /proc readers) may reach it.
func TestAgentBinaryStaysSmall(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "./deploy/agent").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	modules := []string{"go.temporal.io/", "github.com/aws/", "github.com/prometheus/", "github.com/klauspost/", "go.uber.org/zap"}
	packages := []string{"internal/store/blob", "internal/run/runs", "internal/sandbox/gateway", "internal/research/observe", "internal/store/checkpoint", "internal/sandbox/transcript"}
	for _, dep := range strings.Fields(string(out)) {
		pkg := strings.TrimPrefix(dep, "github.com/mlrb/mlrb/")
		if slices.ContainsFunc(modules, func(m string) bool { return strings.HasPrefix(dep, m) }) || slices.Contains(packages, pkg) {
			t.Errorf("mlrb-agent imports %s", dep)
		}
	}
}

// TestVocabularyHasNoEngines: the words every part uses (runs and
// results, budgets, prices, the agent contract, tasks, agent
// definitions) stand on the floor: no engine of mlrb's (the blob store,
// checkpoints, observation, the gateway) and no SDK of a cloud,
// Temporal or Docker may reach them, so that reading a result or a task
// pulls nothing else in.
func TestVocabularyHasNoEngines(t *testing.T) {
	vocabulary := []string{"internal/run/runs", "internal/run/budget", "internal/run/gpucost", "internal/run/llm", "internal/run/contract", "tasks", "agents"}
	modules := []string{"go.temporal.io/", "github.com/aws/", "github.com/moby/", "github.com/prometheus/", "go.uber.org/"}
	for _, pkg := range vocabulary {
		out, err := exec.Command("go", "list", "-deps", "./"+pkg).Output()
		if err != nil {
			t.Fatalf("go list: %v", err)
		}
		for _, dep := range strings.Fields(string(out)) {
			rel, ours := strings.CutPrefix(dep, "github.com/mlrb/mlrb/")
			if (ours && !slices.Contains(vocabulary, rel)) || slices.ContainsFunc(modules, func(m string) bool { return strings.HasPrefix(dep, m) }) {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}

// wingImports are what each wing of internal/ may import of the others
// (its doc.go says the same); process's leaf helpers and the top-level
// vocabulary (tasks, agents, config, deploy) anyone may.
var wingImports = map[string][]string{
	"run":      {},
	"store":    {"run"},
	"sandbox":  {"run", "store"},
	"scoring":  {"run", "store", "sandbox", "research"},
	"research": {"run", "store", "sandbox", "scoring"},
	"fleet":    {"run", "store", "research"},
}

// TestWingsImportAsTheySay: a package of a wing imports only what its
// wing may: the house's floors stay in order as it grows.
func TestWingsImportAsTheySay(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./internal/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "github.com/mlrb/mlrb/"
	anyone := []string{"internal/process/every", "internal/process/ports", "tasks", "agents", "config", "deploy"}
	wing := func(p string) string {
		if parts := strings.Split(p, "/"); len(parts) > 1 && parts[0] == "internal" {
			return parts[1]
		}
		return ""
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		src := strings.TrimPrefix(fields[0], mod)
		allowed, ruled := wingImports[wing(src)]
		if !ruled {
			continue // process and testkit may import anything
		}
		for _, imp := range fields[1:] {
			dst, ours := strings.CutPrefix(imp, mod)
			if !ours || wing(dst) == wing(src) || slices.Contains(anyone, dst) || slices.Contains(allowed, wing(dst)) {
				continue
			}
			t.Errorf("%s imports %s: the %s wing may import only %v", src, dst, wing(src), allowed)
		}
	}
}

// TestFixturesStayOutOfTheBinaries: the made-up observations of
// internal/research/observe/observetest serve tests and benchmarks only.
func TestFixturesStayOutOfTheBinaries(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "./worker", "./starter", "./deploy/agent").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	if slices.Contains(strings.Fields(string(out)), "github.com/mlrb/mlrb/internal/research/observe/observetest") {
		t.Error("a binary imports internal/research/observe/observetest")
	}
}

// TestManualLinksResolve: every relative link of the README and the
// manual names a file that exists, so a page moved or renamed is found
// here, not by a reader.
func TestManualLinksResolve(t *testing.T) {
	pages := []string{"README.md"}
	err := filepath.WalkDir("docs", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			pages = append(pages, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	link := regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			if strings.Contains(m[1], "://") {
				continue
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(page), m[1])); err != nil {
				t.Errorf("%s links to %s: %v", page, m[1], err)
			}
		}
	}
}
