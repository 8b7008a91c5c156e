package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
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
	pid := c.cmd.Process.Pid
	cpu, _ = c.cpu()
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "VmHWM:") {
				kb, _ := strconv.ParseFloat(strings.Fields(l)[1], 64)
				peakMiB = kb / 1024
			}
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
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid))
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	// utime, stime, cutime and cstime are fields 14 to 17 of stat, in
	// clock ticks (100 a second on Linux).
	if len(f) < 15 {
		return 0, 0
	}
	var t [4]float64
	for i := range t {
		t[i], _ = strconv.ParseFloat(f[11+i], 64)
	}
	return (t[0] + t[1]) / 100, (t[2] + t[3]) / 100
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
