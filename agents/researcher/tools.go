// tool is one tool: its spec and what it does with the call's JSON.

package researcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// tool is one tool: its spec and what it does with the call's JSON.
type tool struct {
	spec ToolSpec
	run  func(ctx context.Context, args json.RawMessage) (string, error)
}

func obj(required []string, props map[string]any) map[string]any {
	return map[string]any{"type": "object", "properties": props, "required": required}
}

func str(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }
func num(desc string) map[string]any { return map[string]any{"type": "integer", "description": desc} }

// Limits on a tool's work and what it gives back.
const (
	// outputLimit is the most of a tool's output the conversation gets:
	// its head and tail, with the whole in a file.
	outputLimit = 8 << 10
	// defaultTimeout and maxTimeout bound a foreground command.
	defaultTimeout = 10 * time.Minute
	maxTimeout     = 2 * time.Hour
	// readLines is how many lines read_file gives by default.
	readLines = 200
)

// toolset is the tools of this agent, in the order the model is told.
func (a *Agent) toolset() []tool {
	ts := []tool{
		{ToolSpec{"shell", "Run a command under /bin/sh in the work dir and wait for it (up to timeout_s, default 600). Output is clipped to its head and tail; the whole is kept in a file named in the result. For anything longer, use job_start.",
			obj([]string{"command"}, map[string]any{"command": str("the command line"), "timeout_s": num("seconds before it is killed (at most 7200)")})}, a.shell},
	}
	if py, err := exec.LookPath("python3"); err == nil {
		a.python = py
		ts = append(ts, tool{ToolSpec{"python", "Run Python code (python3 in this image) in the work dir and wait for it, like shell.",
			obj([]string{"code"}, map[string]any{"code": str("the program"), "timeout_s": num("seconds before it is killed (at most 7200)")})}, a.runPython})
	}
	return append(ts,
		tool{ToolSpec{"read_file", "Read a text file's lines, numbered: from line offset (1-based, default 1), limit lines (default 200).",
			obj([]string{"path"}, map[string]any{"path": str("file path, relative to the work dir"), "offset": num("first line"), "limit": num("how many lines")})}, a.readFile},
		tool{ToolSpec{"write_file", "Write a file whole (its directories are made).",
			obj([]string{"path", "content"}, map[string]any{"path": str("file path, relative to the work dir"), "content": str("the file's content")})}, a.writeFile},
		tool{ToolSpec{"replace_in_file", "Replace one occurrence of old with new in a file; old must occur exactly once.",
			obj([]string{"path", "old", "new"}, map[string]any{"path": str("file path"), "old": str("text to replace"), "new": str("replacement")})}, a.replaceInFile},
		tool{ToolSpec{"search_files", "Search files under a directory for a regular expression (RE2); lists path:line: text, at most 200 matches.",
			obj([]string{"pattern"}, map[string]any{"pattern": str("RE2 expression"), "path": str("directory (default the work dir)"), "glob": str("file name pattern, e.g. *.py")})}, a.searchFiles},
		tool{ToolSpec{"job_start", "Start a command in the background (training, evaluation); returns its id. Its output goes to a log in the work dir.",
			obj([]string{"command"}, map[string]any{"command": str("the command line")})}, a.jobStart},
		tool{ToolSpec{"job_check", "A job's status and the tail of its log, after waiting up to wait_s (default 0, at most 600) for it to end.",
			obj([]string{"id"}, map[string]any{"id": str("job id"), "wait_s": num("seconds to wait for it to end")})}, a.jobCheck},
		tool{ToolSpec{"job_cancel", "Kill a background job and everything it started.",
			obj([]string{"id"}, map[string]any{"id": str("job id")})}, a.jobCancel},
		tool{ToolSpec{"submit", "Submit the model in model_dir (relative to the work dir) for evaluation: it must hold the task's model files. Submit again whenever a better model is ready; with done=true the agent stops.",
			obj([]string{"model_dir"}, map[string]any{"model_dir": str("e.g. output/model"), "done": map[string]any{"type": "boolean", "description": "stop working after this submission"}})}, a.submit},
	)
}

// call runs one tool call; a failure is the tool's result, for the model.
func (a *Agent) call(ctx context.Context, c Call) Message {
	msg := Message{Role: RoleTool, CallID: c.ID, Tool: c.Name}
	var run func(context.Context, json.RawMessage) (string, error)
	for _, t := range a.tools {
		if t.spec.Name == c.Name {
			run = t.run
		}
	}
	args := json.RawMessage(c.Args)
	if len(strings.TrimSpace(c.Args)) == 0 {
		args = json.RawMessage("{}")
	}
	var out string
	var err error
	switch {
	case run == nil:
		err = fmt.Errorf("no tool named %q", c.Name)
	case !json.Valid(args):
		err = errors.New("the arguments are not JSON")
	default:
		out, err = run(ctx, args)
	}
	if err != nil {
		msg.Text, msg.Error = "error: "+err.Error(), true
		return msg
	}
	msg.Text = out
	return msg
}

// path resolves p against the work dir: the agent works in its own
// sandbox, so an absolute path is taken as given.
func (a *Agent) path(p string) (string, error) {
	if p == "" {
		return "", errors.New("path is empty")
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p), nil
	}
	return filepath.Join(a.Env.Workdir, p), nil
}

// decode reads a call's arguments strictly, naming the field at fault.
func decode(args json.RawMessage, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(args)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("arguments: %w", err)
	}
	return nil
}

func (a *Agent) writeFile(_ context.Context, args json.RawMessage) (string, error) {
	var in struct{ Path, Content string }
	if err := decode(args, &in); err != nil {
		return "", err
	}
	p, err := a.path(in.Path)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(p, []byte(in.Content), 0o644); err != nil {
		return "", err
	}
	return fmt.Sprintf("wrote %d bytes to %s", len(in.Content), in.Path), nil
}

func (a *Agent) replaceInFile(_ context.Context, args json.RawMessage) (string, error) {
	var in struct{ Path, Old, New string }
	if err := decode(args, &in); err != nil {
		return "", err
	}
	p, err := a.path(in.Path)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	switch n := strings.Count(string(b), in.Old); {
	case in.Old == "":
		return "", errors.New("old is empty")
	case n == 0:
		return "", fmt.Errorf("old does not occur in %s", in.Path)
	case n > 1:
		return "", fmt.Errorf("old occurs %d times in %s: give more context so it occurs once", n, in.Path)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), in.Old, in.New, 1)), 0o644); err != nil {
		return "", err
	}
	return "replaced 1 occurrence in " + in.Path, nil
}
