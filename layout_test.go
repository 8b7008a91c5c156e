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
// in the packages a newcomer reads first (the workflows, the activities
// and their workspace drivers, the worker's assembly, the CLI) and where rules are written as steps
// (the config's validation, the container driver's Start).
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
		if dir := filepath.Dir(p); !slices.Contains([]string{"workflows", "activities", "internal/process/app", "starter", "config", "internal/sandbox/runtime", "internal/sandbox/workspace"}, dir) && !strings.HasPrefix(dir, "activities/") {
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
	out, err := exec.Command("go", "list", "-deps", "./cmd/mlrb-agent").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	modules := []string{"go.temporal.io/", "github.com/aws/", "github.com/prometheus/", "github.com/klauspost/", "go.uber.org/zap"}
	packages := []string{"internal/store/blob", "internal/run/runs", "internal/sandbox/gateway", "internal/sandbox/observe", "internal/store/checkpoint", "internal/sandbox/transcript"}
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

// TestFixturesStayOutOfTheBinaries: the made-up observations of
// internal/sandbox/observe/observetest serve tests and benchmarks only.
func TestFixturesStayOutOfTheBinaries(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "./worker", "./starter", "./cmd/mlrb-agent").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	if slices.Contains(strings.Fields(string(out)), "github.com/mlrb/mlrb/internal/sandbox/observe/observetest") {
		t.Error("a binary imports internal/sandbox/observe/observetest")
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
