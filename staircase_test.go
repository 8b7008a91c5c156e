package mlrb_test

import (
	"go/parser"
	"go/token"
	"maps"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// floorSentence is how a room's package doc says where it stands; the
// rule is written there once and read here.
var floorSentence = regexp.MustCompile(`stands\s+(?:[a-z ,]+\s+)?on\s+floor\s+(\d+)`)

// rooms are where the staircase's rule is written: each wing of
// internal/ (its doc.go) and the wire and orchestration over them.
// testkit stands beside the house and is not a room.
var rooms = []string{"internal/kit", "internal/run", "internal/store", "internal/sandbox", "internal/scoring",
	"internal/results", "internal/fleet", "activities", "workflows", "internal/process"}

// vocabulary are the top-level packages anyone may use who stands above
// everything they import: tasks, config, deploy, agents.
var vocabulary = []string{"tasks", "config", "deploy", "agents"}

const mod = "github.com/mlrb/mlrb/"

// floorOf reads the floor a room's package doc states.
func floorOf(t *testing.T, dir string) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if f.Doc == nil {
			continue
		}
		if m := floorSentence.FindStringSubmatch(strings.Join(strings.Fields(f.Doc.Text()), " ")); m != nil {
			n, _ := strconv.Atoi(m[1])
			return n
		}
	}
	t.Fatalf("%s: its package doc says on no floor where it stands (\"It stands on floor N.\")", dir)
	return 0
}

// roomOf is the room a package of the module is in ("" : none).
func roomOf(pkg string) string {
	for _, r := range rooms {
		if pkg == r || strings.HasPrefix(pkg, r+"/") {
			return r
		}
	}
	return ""
}

// vocabularyOf is the vocabulary package pkg is of ("" : none).
func vocabularyOf(pkg string) string {
	for _, v := range vocabulary {
		if pkg == v || strings.HasPrefix(pkg, v+"/") {
			return v
		}
	}
	return ""
}

// imports maps each package of the module to what it imports of it.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	all := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		src := strings.TrimPrefix(f[0], mod)
		all[src] = nil
		for _, imp := range f[1:] {
			if d, ok := strings.CutPrefix(imp, mod); ok {
				all[src] = append(all[src], d)
			}
		}
	}
	return all
}

// TestStaircase: the house is a staircase. Each room states its floor
// in its package doc; a package imports only its own room, the rooms on
// floors below its own, and the vocabulary packages that stand below it
// (a vocabulary package stands just above the highest room it imports).
// No arrow runs back up, so there is no circle.
func TestStaircase(t *testing.T) {
	floor := map[string]int{}
	for _, r := range rooms {
		floor[r] = floorOf(t, filepath.FromSlash(r))
	}
	all := imports(t)
	vocab := map[string]int{} // twice the floor, plus one: just above
	for src, deps := range all {
		if v := vocabularyOf(src); v != "" {
			for _, d := range deps {
				if r := roomOf(d); r != "" {
					vocab[v] = max(vocab[v], 2*floor[r]+1)
				}
			}
		}
	}
	for _, src := range slices.Sorted(maps.Keys(all)) {
		r := roomOf(src)
		if r == "" {
			continue
		}
		for _, d := range all[src] {
			dr, dv := roomOf(d), vocabularyOf(d)
			switch {
			case dr == r:
			case dr != "" && floor[dr] < floor[r]:
			case dv != "" && vocab[dv] < 2*floor[r]:
			case dr != "":
				t.Errorf("%s (floor %d) imports %s (floor %d): a room imports only the floors below it", src, floor[r], d, floor[dr])
			case dv != "":
				t.Errorf("%s (floor %d) imports %s, which stands above floor %d", src, floor[r], d, vocab[dv]/2)
			default:
				t.Errorf("%s (floor %d) imports %s, which is in no room below it", src, floor[r], d)
			}
		}
	}
}

// concerns are activities' packages and the ones of them each may
// import: the wire imports none, host only the wire, and no part of a
// run imports another's.
var concerns = map[string][]string{
	"activities":            nil,
	"activities/host":       {"activities"},
	"activities/attempt":    {"activities", "activities/host"},
	"activities/evaluation": {"activities", "activities/host"},
	"activities/records":    {"activities"},
}

// TestActivitiesByConcern: inside activities, the wire stands under
// host, and host under the attempt and the evaluation; no concern
// imports another beside it.
func TestActivitiesByConcern(t *testing.T) {
	for src, deps := range imports(t) {
		if roomOf(src) != "activities" {
			continue
		}
		allowed, ok := concerns[src]
		if !ok {
			t.Errorf("%s is a package of activities that concerns names no place for", src)
			continue
		}
		for _, d := range deps {
			if roomOf(d) == "activities" && !slices.Contains(allowed, d) {
				t.Errorf("%s imports %s: a concern imports only %v of activities", src, d, allowed)
			}
		}
	}
}
