package e2e

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// walkthroughs are the manual's pages whose commands a reader types in
// order: each block fenced as "```sh walkthrough" runs here as written.
var walkthroughs = []string{"use/compare-agents.md"}

// TestManualWalkthroughs runs the manual's walkthroughs, so that they
// cannot drift from what the binaries do: `go run ./worker …` starts the
// worker (left running, as the reader leaves it), every `go run
// ./starter …` must exit 0, in a directory of the reader's own.
func TestManualWalkthroughs(t *testing.T) {
	parallel(t)
	for _, page := range walkthroughs {
		t.Run(page, func(t *testing.T) {
			e := newEnv(t)
			e.timeout = 10 * time.Minute
			cwd := t.TempDir()
			for _, cmd := range walkthroughCommands(t, filepath.Join(repoRoot(t), "docs", page)) {
				args := strings.Fields(cmd)
				if len(args) < 3 || args[0] != "go" || args[1] != "run" {
					t.Fatalf("%s: %q is not `go run ./worker|./starter …`", page, cmd)
				}
				switch bin := strings.TrimPrefix(args[2], "./"); bin {
				case "worker":
					e.worker = e.start("worker", args[3:]...)
					e.waitServer()
				case "starter":
					out, errs, code := e.starterIn(cwd, args[3:]...)
					if code != 0 {
						e.dumpLogs()
						t.Fatalf("%s: %s exited %d:\n%s\n%s", page, cmd, code, out, errs)
					}
					t.Logf("$ %s\n%s", cmd, out)
				default:
					t.Fatalf("%s: %q runs %s, which the walkthrough test does not know", page, cmd, bin)
				}
			}
		})
	}
}

// TestReadmeCommandsAreTheWalkthroughs: the README's "compare two
// agents" commands are the walkthrough's, which TestManualWalkthroughs
// runs.
func TestReadmeCommandsAreTheWalkthroughs(t *testing.T) {
	parallel(t)
	var all []string
	for _, page := range walkthroughs {
		all = append(all, walkthroughCommands(t, filepath.Join(repoRoot(t), "docs", page))...)
	}
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Compare two agents\n")
	_, block, ok2 := strings.Cut(section, "```sh\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("README.md has no sh block under ## Compare two agents")
	}
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		cmd, _, _ := strings.Cut(line, "  #")
		if cmd = strings.TrimSpace(cmd); !slices.Contains(all, cmd) {
			t.Errorf("the README's %q is in no walkthrough: add it to one, so that it is run", cmd)
		}
	}
}

// walkthroughCommands are the commands of a page's walkthrough blocks,
// their comments left out.
func walkthroughCommands(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	in := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```sh walkthrough"):
			in = true
		case strings.HasPrefix(line, "```"):
			in = false
		case in && strings.TrimSpace(line) != "":
			cmd, _, _ := strings.Cut(line, "  #")
			cmds = append(cmds, strings.TrimSpace(cmd))
		}
	}
	if len(cmds) == 0 {
		t.Fatalf("%s has no walkthrough block", path)
	}
	return cmds
}
