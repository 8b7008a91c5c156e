// The research agent's shell tool: a command run with its bound, output kept.

package researcher

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/mlrb/mlrb/internal/run/contract"
)

// timeout is a command's bound: asked for, capped, and never past the
// deadline (less the margin kept to submit).
func (a *Agent) timeout(asked int) time.Duration {
	d := defaultTimeout
	if asked > 0 {
		d = min(time.Duration(asked)*time.Second, maxTimeout)
	}
	if left := time.Until(a.Env.CurrentDeadline()) - a.margin; left < d {
		d = max(left, time.Second)
	}
	return d
}

func (a *Agent) shell(ctx context.Context, args json.RawMessage) (string, error) {
	var in struct {
		Command  string `json:"command"`
		TimeoutS int    `json:"timeout_s"`
	}
	if err := decode(args, &in); err != nil {
		return "", err
	}
	return a.foreground(ctx, in.Command, a.timeout(in.TimeoutS))
}

func (a *Agent) runPython(ctx context.Context, args json.RawMessage) (string, error) {
	var in struct {
		Code     string `json:"code"`
		TimeoutS int    `json:"timeout_s"`
	}
	if err := decode(args, &in); err != nil {
		return "", err
	}
	rel := filepath.Join(Home, "out", fmt.Sprintf("step-%d.py", a.state.Steps))
	p := filepath.Join(a.Env.Workdir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(p, []byte(in.Code), 0o644); err != nil {
		return "", err
	}
	return a.foreground(ctx, a.python+" "+rel, a.timeout(in.TimeoutS))
}

// foreground runs line and waits up to d; its whole output is kept in a
// file, the conversation gets its head and tail.
func (a *Agent) foreground(ctx context.Context, line string, d time.Duration) (string, error) {
	rel := filepath.Join(Home, "out", fmt.Sprintf("step-%d-%d.txt", a.state.Steps, len(a.state.Messages)))
	p := filepath.Join(a.Env.Workdir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	f, err := os.Create(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	cmd := shellCommand(a.Env.Workdir, line)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t := time.NewTimer(d)
	defer t.Stop()
	status := ""
	select {
	case err = <-done:
	case <-t.C:
		status = fmt.Sprintf(" (killed after %s: use job_start for long work)", d.Round(time.Second))
	case <-ctx.Done():
		status = " (killed: the agent is stopping)"
	}
	if status != "" {
		killGroup(cmd)
		err = <-done
	}
	code := 0
	if err != nil {
		code = -1
		if ee, ok := err.(interface{ ExitCode() int }); ok {
			code = ee.ExitCode()
		}
	}
	out, _ := os.ReadFile(p)
	return fmt.Sprintf("exit %d%s\n%s", code, status, clip(string(out), outputLimit, rel)), nil
}

func (a *Agent) readFile(_ context.Context, args json.RawMessage) (string, error) {
	var in struct {
		Path          string `json:"path"`
		Offset, Limit int
	}
	if err := decode(args, &in); err != nil {
		return "", err
	}
	p, err := a.path(in.Path)
	if err != nil {
		return "", err
	}
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	first, limit := max(in.Offset, 1), in.Limit
	if limit <= 0 {
		limit = readLines
	}
	var b strings.Builder
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		if n < first {
			continue
		}
		if n >= first+limit || b.Len() > outputLimit {
			fmt.Fprintf(&b, "[... more from line %d: read on with offset %d]\n", n, n)
			break
		}
		fmt.Fprintf(&b, "%6d\t%s\n", n, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return b.String(), fmt.Errorf("line %d: %w", n+1, err)
	}
	if b.Len() == 0 {
		return fmt.Sprintf("%s has %d lines; nothing from line %d", in.Path, n, first), nil
	}
	return b.String(), nil
}

// maxMatches bounds a search's answer; maxSearched the size of a file it
// reads.
const (
	maxMatches  = 200
	maxSearched = 16 << 20
)

func (a *Agent) searchFiles(_ context.Context, args json.RawMessage) (string, error) {
	var in struct{ Pattern, Path, Glob string }
	if err := decode(args, &in); err != nil {
		return "", err
	}
	re, err := regexp.Compile(in.Pattern)
	if err != nil {
		return "", fmt.Errorf("pattern: %w", err)
	}
	root := a.Env.Workdir
	if in.Path != "" {
		if root, err = a.path(in.Path); err != nil {
			return "", err
		}
	}
	var b strings.Builder
	matches := 0
	stop := errors.New("enough")
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		if ok, _ := filepath.Match(in.Glob, d.Name()); in.Glob != "" && !ok {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		return grep(p, rel, re, &b, &matches, stop)
	})
	if err != nil && !errors.Is(err, stop) {
		return b.String(), err
	}
	if matches == 0 {
		return "no match", nil
	}
	return clip(b.String(), outputLimit, "(run the search again with a narrower path or glob)"), nil
}

func grep(p, rel string, re *regexp.Regexp, b *strings.Builder, matches *int, stop error) error {
	f, err := os.Open(p)
	if err != nil {
		return nil
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSearched))
	if err != nil || bytes.IndexByte(data[:min(len(data), 512)], 0) >= 0 {
		return nil // unreadable or binary
	}
	for i, line := range strings.Split(string(data), "\n") {
		if re.MatchString(line) {
			fmt.Fprintf(b, "%s:%d: %s\n", rel, i+1, clip(line, 300, rel))
			if *matches++; *matches >= maxMatches {
				fmt.Fprintf(b, "[stopped at %d matches]\n", maxMatches)
				return stop
			}
		}
	}
	return nil
}

func (a *Agent) submit(_ context.Context, args json.RawMessage) (string, error) {
	var in struct {
		ModelDir string `json:"model_dir"`
		Done     bool   `json:"done"`
	}
	if err := decode(args, &in); err != nil {
		return "", err
	}
	if err := a.writeSubmission(in.ModelDir); err != nil {
		return "", err
	}
	a.mu.Lock()
	a.state.Submitted, a.state.Done = filepath.ToSlash(filepath.Clean(in.ModelDir)), in.Done
	a.mu.Unlock()
	if in.Done {
		return "submitted " + in.ModelDir + "; the agent stops now", nil
	}
	return "submitted " + in.ModelDir + " (submit again if a better model comes; done=true to stop)", nil
}

// writeSubmission checks dir holds a model and writes submission.json
// naming it.
func (a *Agent) writeSubmission(dir string) error {
	rel := filepath.Clean(dir)
	if filepath.IsAbs(rel) {
		r, err := filepath.Rel(a.Env.Workdir, rel)
		if err != nil || strings.HasPrefix(r, "..") {
			return fmt.Errorf("model_dir %s is outside the work dir %s", dir, a.Env.Workdir)
		}
		rel = r
	}
	if strings.HasPrefix(rel, "..") {
		return fmt.Errorf("model_dir %s is outside the work dir", dir)
	}
	if err := checkModelDir(filepath.Join(a.Env.Workdir, rel), a.Spec.Reference != nil); err != nil {
		return err
	}
	b, _ := json.Marshal(contract.Submission{ModelPath: filepath.ToSlash(rel)})
	out := a.Env.OutputDir()
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(out, "."+contract.SubmissionFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(out, contract.SubmissionFile))
}

// checkModelDir: a directory holding a config.json and the weights, in
// safetensors (a real task's) or the mini suite's model.json.
func checkModelDir(dir string, mini bool) error {
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return fmt.Errorf("model_dir %s is not a directory", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		return fmt.Errorf("model_dir %s has no config.json", dir)
	}
	if mini {
		if _, err := os.Stat(filepath.Join(dir, "model.json")); err == nil {
			return nil
		}
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.safetensors")); len(m) > 0 {
		return nil
	}
	return fmt.Errorf("model_dir %s holds no *.safetensors weights", dir)
}
