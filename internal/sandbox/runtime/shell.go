// Shells is a task a person works in (a container).

package runtime

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/moby/moby/client"
)

// Shells is a task a person works in (a container): shells opened in it
// on a pseudo-terminal, and the whole task frozen while their clock is
// paused, so that no work goes on that the clock does not count.
type Shells interface {
	Shell(ctx context.Context, spec ShellSpec) (Shell, error)
	Freeze(ctx context.Context) error
	Thaw(ctx context.Context) error
}

// ShellSpec is a shell to open: its command, user and directory, and its
// terminal's size.
type ShellSpec struct {
	Command    []string
	User, Dir  string
	Env        []string
	Cols, Rows uint
}

// Shell is a shell on a pseudo-terminal in a task: what is written is
// typed, what is read is the terminal's output.
type Shell interface {
	io.ReadWriteCloser
	Resize(cols, rows uint) error
	// Exited tells whether the shell's process ended.
	Exited(ctx context.Context) bool
}

// Shell opens a shell in the container (docker exec with a TTY).
func (h *dockerHandle) Shell(ctx context.Context, spec ShellSpec) (Shell, error) {
	ex, err := h.d.c.ExecCreate(ctx, h.id, client.ExecCreateOptions{
		User: spec.User, WorkingDir: spec.Dir, Env: spec.Env, Cmd: spec.Command,
		TTY: true, AttachStdin: true, AttachStdout: true, AttachStderr: true,
		ConsoleSize: client.ConsoleSize{Height: spec.Rows, Width: spec.Cols},
	})
	if err != nil {
		return nil, fmt.Errorf("shell in %s: %w", h.name, err)
	}
	res, err := h.d.c.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{TTY: true, ConsoleSize: client.ConsoleSize{Height: spec.Rows, Width: spec.Cols}})
	if err != nil {
		return nil, fmt.Errorf("shell in %s: %w", h.name, err)
	}
	return &dockerShell{d: h.d, id: ex.ID, conn: res.Conn, r: res.Reader}, nil
}

// Freeze pauses every process of the container (the cgroup freezer).
func (h *dockerHandle) Freeze(ctx context.Context) error {
	if _, err := h.d.c.ContainerPause(ctx, h.id, client.ContainerPauseOptions{}); err != nil && !strings.Contains(err.Error(), "already paused") {
		return fmt.Errorf("freeze %s: %w", h.name, err)
	}
	return nil
}

// Thaw lets a frozen container's processes run again.
func (h *dockerHandle) Thaw(ctx context.Context) error {
	if _, err := h.d.c.ContainerUnpause(ctx, h.id, client.ContainerUnpauseOptions{}); err != nil && !strings.Contains(err.Error(), "not paused") {
		return fmt.Errorf("thaw %s: %w", h.name, err)
	}
	return nil
}

type dockerShell struct {
	d    *Docker
	id   string
	conn net.Conn
	r    io.Reader
}

func (s *dockerShell) Read(p []byte) (int, error)  { return s.r.Read(p) }
func (s *dockerShell) Write(p []byte) (int, error) { return s.conn.Write(p) }
func (s *dockerShell) Close() error                { return s.conn.Close() }

func (s *dockerShell) Resize(cols, rows uint) error {
	_, err := s.d.c.ExecResize(context.Background(), s.id, client.ExecResizeOptions{Height: rows, Width: cols})
	return err
}

func (s *dockerShell) Exited(ctx context.Context) bool {
	st, err := s.d.c.ExecInspect(ctx, s.id, client.ExecInspectOptions{})
	return err != nil || !st.Running
}
