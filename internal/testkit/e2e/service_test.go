package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// restartAfter is deploy/cluster/temporal@.service's RestartSec.
const restartAfter = 3 * time.Second

// service is one Temporal service run as deploy/cluster's unit runs it
// (Restart=always): one that exits is started again after restartAfter, as
// a history that met its database restarting while it started must be.
// kill stops it until startService starts it anew.
type service struct {
	mu      sync.Mutex
	cmd     *exec.Cmd
	stopped bool
	done    chan struct{}
}

func (s *service) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd.Process.Pid
}

// supervise waits on the service's process and, for each exit not asked
// for, writes it to log and starts the service again after restartAfter.
func (s *service) supervise(start func() (*exec.Cmd, error), log *os.File) {
	defer close(s.done)
	for {
		s.mu.Lock()
		cmd := s.cmd
		s.mu.Unlock()
		err := cmd.Wait()
		if s.isStopped() {
			return
		}
		fmt.Fprintf(log, "supervisor: exited (%v); restarting in %s\n", err, restartAfter)
		time.Sleep(restartAfter)
		s.mu.Lock()
		if s.stopped {
			s.mu.Unlock()
			return
		}
		next, err := start()
		if err != nil {
			s.mu.Unlock()
			fmt.Fprintf(log, "supervisor: start: %v\n", err)
			return
		}
		s.cmd = next
		s.mu.Unlock()
	}
}

func (s *service) isStopped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopped
}

// stop ends supervision and the process with sig, and waits for both.
func (s *service) stop(sig os.Signal) {
	s.mu.Lock()
	s.stopped = true
	_ = s.cmd.Process.Signal(sig)
	s.mu.Unlock()
	<-s.done
}

// startService starts one service under supervision and waits until its
// gRPC port accepts.
func (c *cluster) startService(t *testing.T, svc string) {
	t.Helper()
	logf, err := os.OpenFile(filepath.Join(c.dir, svc+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	start := func() (*exec.Cmd, error) {
		cmd := exec.Command(filepath.Join(bin, "temporal-server"), "--config-file", filepath.Join(repoRoot(t), "deploy", "cluster", "temporal.yaml"),
			"--allow-no-auth", "start", "--service", svc)
		cmd.Env = append(os.Environ(), c.env...)
		cmd.Stdout, cmd.Stderr = logf, logf
		return cmd, cmd.Start()
	}
	cmd, err := start()
	if err != nil {
		t.Fatal(err)
	}
	s := &service{cmd: cmd, done: make(chan struct{})}
	go s.supervise(start, logf)
	c.procs[svc] = s
	t.Cleanup(func() {
		s.stop(syscall.SIGTERM)
		_ = logf.Close()
	})
	addr := "127.0.0.1:" + c.port(svc)
	deadline := time.Now().Add(time.Minute)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = conn.Close()
			return
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(c.dir, svc+".log"))
			t.Fatalf("%s did not listen on %s within a minute:\n%s", svc, addr, tail(b, 4000))
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// kill ends a service with SIGKILL, as a crashed host would, and keeps it
// down.
func (c *cluster) kill(t *testing.T, svc string) {
	t.Helper()
	c.procs[svc].stop(os.Kill)
}
