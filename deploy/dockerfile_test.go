package deploy

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mlrb/mlrb/tasks"
)

// instructions are a Dockerfile's instructions, continuation lines
// joined and comments left out.
func instructions(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	cur := ""
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur == "" && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur += strings.TrimSuffix(trimmed, "\\") + " "
			continue
		}
		out = append(out, cur+trimmed)
		cur = ""
	}
	return out
}

// constraintsOf reads a constraints file, and says which of its lines
// are not name==version.
func constraintsOf(path string) (map[string]string, []string) {
	f, err := os.Open(path)
	if err != nil {
		return nil, []string{path + ": " + err.Error() + " (an image that pip-installs needs its constraints file beside its Dockerfile)"}
	}
	defer func() { _ = f.Close() }()
	var bad []string
	pins := map[string]string{}
	pin := regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9._-]*)==([0-9][0-9A-Za-z.+!-]*)$`)
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(strings.SplitN(s.Text(), "#", 2)[0])
		if line == "" {
			continue
		}
		m := pin.FindStringSubmatch(line)
		if m == nil {
			bad = append(bad, path+": "+line+" is not pinned as name==version")
			continue
		}
		pins[normalise(m[1])] = m[2]
	}
	return pins, bad
}

func normalise(name string) string {
	return strings.ToLower(regexp.MustCompile(`[-_.]+`).ReplaceAllString(name, "-"))
}

// tools are the OS packages an image may install from its base's
// package sources unpinned: tools of the build (fetching elan and
// mathlib), which take no part in a score.
var tools = []string{"curl", "git", "ca-certificates"}

// checkDockerfile lists what makes an image build differently twice, or
// not at all: a pip install without the image's constraints or with a
// requirement they do not pin, PEP 668 unhandled, a download of "latest",
// a download not checked by its checksum, a script piped to a shell, an
// OS package that is not a build tool; and a smoke step that is not last.
func checkDockerfile(t *testing.T, path, smoke string) []string {
	t.Helper()
	var bad []string
	ins := instructions(t, path)
	var pins map[string]string
	pep668, constrained := false, false
	lastRun := ""
	for _, in := range ins {
		word, rest, _ := strings.Cut(in, " ")
		switch strings.ToUpper(word) {
		case "ENV":
			if strings.Contains(rest, "PIP_BREAK_SYSTEM_PACKAGES=1") {
				pep668 = true
			}
			if m := regexp.MustCompile(`PIP_CONSTRAINT=(\S+)`).FindStringSubmatch(rest); m != nil {
				constrained = true
			}
		case "COPY":
			for _, f := range strings.Fields(rest) {
				if strings.HasSuffix(f, "constraints.txt") && !strings.HasPrefix(f, "/") {
					var unpinned []string
					pins, unpinned = constraintsOf(filepath.Join(filepath.Dir(path), f))
					bad = append(bad, unpinned...)
				}
			}
		case "ADD":
			if strings.Contains(rest, "http") && !strings.Contains(rest, "--checksum=sha256:") {
				bad = append(bad, "ADD of a URL without --checksum: "+in)
			}
		case "RUN":
			lastRun = rest
		}
		if strings.ToUpper(word) != "RUN" {
			continue
		}
		if strings.Contains(rest, "latest") {
			bad = append(bad, "downloads latest: "+in)
		}
		if regexp.MustCompile(`\|\s*(sh|bash)\b`).MatchString(rest) {
			bad = append(bad, "pipes a download to a shell: "+in)
		}
		if regexp.MustCompile(`\b(curl|wget)\b[^&;|]*https?://`).MatchString(rest) && !strings.Contains(rest, "sha256sum -c") {
			bad = append(bad, "downloads without checking a checksum: "+in)
		}
		if m := regexp.MustCompile(`apt-get install ([^&;]*)`).FindStringSubmatch(rest); m != nil {
			for _, p := range strings.Fields(m[1]) {
				if !strings.HasPrefix(p, "-") && !slices.Contains(tools, p) {
					bad = append(bad, "installs OS package "+p+", which is not a build tool: pin it or leave it out")
				}
			}
		}
		for _, m := range regexp.MustCompile(`pip3? install ([^&;]*)`).FindAllStringSubmatch(rest, -1) {
			if !pep668 {
				bad = append(bad, "pip install before PEP 668 is handled (ENV PIP_BREAK_SYSTEM_PACKAGES=1): "+in)
			}
			if !constrained || pins == nil {
				bad = append(bad, "pip install without the image's constraints (ENV PIP_CONSTRAINT, and the file copied in): "+in)
			}
			for _, req := range strings.Fields(m[1]) {
				req = strings.Trim(req, `"'`)
				if strings.HasPrefix(req, "-") {
					continue
				}
				name, version, ok := strings.Cut(req, "==")
				name = regexp.MustCompile(`\[.*\]`).ReplaceAllString(name, "")
				if !ok || pins[normalise(name)] != version {
					bad = append(bad, "requirement "+req+" is not the version its constraints pin ("+pins[normalise(name)]+")")
				}
			}
		}
	}
	if !strings.Contains(lastRun, smoke) {
		bad = append(bad, "the last RUN is not the smoke step "+smoke+": "+lastRun)
	}
	return bad
}

// TestEvaluatorImagesBuildTheSameTwice: the shipped evaluator images
// pass every check above.
func TestEvaluatorImagesBuildTheSameTwice(t *testing.T) {
	for file, smoke := range map[string]string{"evaluator.Dockerfile": "mlrb-lmeval-smoke", "autoformalization.Dockerfile": "train_hashes.txt"} {
		if bad := checkDockerfile(t, file, smoke); len(bad) > 0 {
			t.Errorf("%s:\n  %s", file, strings.Join(bad, "\n  "))
		}
	}
}

// TestTheDockerfileCheckFails: the check finds each kind of fault, in a
// Dockerfile written to have it (a check that cannot fail checks nothing).
func TestTheDockerfileCheckFails(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "constraints.txt"), []byte("torch==2.10.0\nnumpy>=2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	body := `FROM pytorch/pytorch:2.10.0-cuda12.8-cudnn9-runtime
RUN pip install numpy
COPY constraints.txt /opt/c.txt
RUN apt-get install -y python3-lxml
RUN curl -sSfL https://example.org/releases/latest/download/x.tar.gz -o /tmp/x
RUN curl -sSf https://example.org/install.sh | sh
ADD https://example.org/y.tar.gz /tmp/
RUN mlrb-lmeval-smoke /opt/smoke
RUN echo after the smoke
`
	df := filepath.Join(dir, "x.Dockerfile")
	if err := os.WriteFile(df, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := strings.Join(checkDockerfile(t, df, "mlrb-lmeval-smoke"), "\n")
	for _, want := range []string{"numpy>=2 is not pinned", "before PEP 668", "without the image's constraints", "requirement numpy", "OS package python3-lxml", "downloads latest", "pipes a download", "without checking a checksum", "ADD of a URL", "last RUN is not the smoke"} {
		if !strings.Contains(bad, want) {
			t.Errorf("the check missed %q; it found:\n%s", want, bad)
		}
	}
}

// TestImagesHoldTheCatalogsControls: each real task's control is built
// into its evaluator's image, at the path, model and revision the
// catalog names.
func TestImagesHoldTheCatalogsControls(t *testing.T) {
	cat, err := tasks.Load("")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"mlrb-evaluator:lm-eval-0.4.12": "lmeval/controls.txt", "mlrb-evaluator:autoformalization-lean3": "autoformalization/controls.txt"}
	listed := map[string]map[string]string{}
	for image, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		listed[image] = map[string]string{}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 3 && !strings.HasPrefix(f[0], "#") {
				listed[image][f[0]] = f[1] + " " + f[2]
			}
		}
	}
	for _, id := range cat.IDs("full") {
		s, _ := cat.Get(id)
		c := s.Evaluation.Control
		rev := c.Revision
		if rev == "" {
			rev = "-"
		}
		if got := listed[s.Evaluation.Image][c.Path]; got != c.Model+" "+rev {
			t.Errorf("%s's control %s@%s at %s: the image %s builds %q there", id, c.Model, rev, c.Path, s.Evaluation.Image, got)
		}
	}
}
