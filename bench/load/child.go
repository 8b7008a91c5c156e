// child is a running server or worker process.

package main

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// child is a running server or worker process.
type child struct {
	name string
	cmd  *exec.Cmd
}

func start(name string, env []string, log string) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	f, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(append(os.Environ(), env...), roleEnv+"="+name)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return &child{name: name, cmd: cmd}, nil
}

// usage is a process's CPU seconds so far and its peak resident memory
// (nothing for a cluster's server, which is not a child).
func (c *child) usage() (cpu float64, peakMiB float64) {
	if c == nil {
		return 0, 0
	}
	cpu, _ = c.cpu()
	if p, err := procfs.NewProc(c.cmd.Process.Pid); err == nil {
		if st, err := p.NewStatus(); err == nil {
			peakMiB = float64(st.VmHWM) / (1 << 20)
		}
	}
	return cpu, peakMiB
}

// cpu is the process's own CPU seconds so far and those of its children
// it has waited for (a worker's agents and evaluators).
func (c *child) cpu() (own, reaped float64) {
	if c == nil {
		return 0, 0
	}
	p, err := procfs.NewProc(c.cmd.Process.Pid)
	if err != nil {
		return 0, 0
	}
	st, err := p.Stat()
	if err != nil {
		return 0, 0
	}
	// cutime and cstime are in clock ticks, USER_HZ: 100 a second on Linux.
	return st.CPUTime(), float64(st.CUTime+st.CSTime) / 100
}

func (c *child) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}
