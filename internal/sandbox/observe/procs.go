// The agent's processes on the host: a process tree or a container's cgroup, OOM kills.

package observe

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// Scope names an agent's processes on this host.
type Scope interface {
	// PIDs are the agent's processes now, as host pids.
	PIDs() ([]int, error)
	// RootPID is the agent's first process.
	RootPID() int
	// OOMKills is how many processes the kernel's OOM killer ended in
	// the agent's cgroup so far; false where that cannot be known.
	OOMKills() (int, bool)
}

// Tree is a process runtime's agent: its first process, every process
// descending from it and every process of its process group (a
// daemonized one keeps its group).
type Tree struct{ Root int }

func (t *Tree) RootPID() int          { return t.Root }
func (t *Tree) OOMKills() (int, bool) { return 0, false }

// PIDs walks /proc once: a parent links its children, and the root's
// group is the agent's too. It reads only each process's stat, through
// one buffer: a worker of 64 agents walks some hundred processes for
// every sample of each. A root gone with an empty group needs no walk
// (an agent's last sample, nearly always): its children, if any are
// left, were given to another parent, so a walk would find the root
// alone too.
func (t *Tree) PIDs() ([]int, error) {
	if gone(t.Root) && gone(-t.Root) {
		return []int{t.Root}, nil
	}
	return t.walk()
}

// gone tells whether no process (pid > 0) or no process group member
// (pid < 0) is left to signal; a zombie not yet reaped is still there.
func gone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// walk is PIDs from a walk of /proc.
func (t *Tree) walk() ([]int, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	names, err := d.Readdirnames(-1)
	_ = d.Close()
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	children := map[int][]int{}
	var group []int
	buf := make([]byte, 512)
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue // not a process
		}
		ppid, pgrp, ok := statLinks(pid, buf)
		if !ok {
			continue // gone meanwhile
		}
		children[ppid] = append(children[ppid], pid)
		if pgrp == t.Root && pid != t.Root {
			group = append(group, pid)
		}
	}
	seen := map[int]bool{t.Root: true}
	out := []int{t.Root}
	queue := append([]int{t.Root}, group...)
	for _, g := range group {
		if !seen[g] {
			seen[g] = true
			out = append(out, g)
		}
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
				queue = append(queue, c)
			}
		}
	}
	return out, nil
}

// statLinks reads a process's parent and process group from
// /proc/<pid>/stat ("pid (comm) state ppid pgrp ..."; comm may hold
// spaces and parentheses, so the fields start after the last ')').
func statLinks(pid int, buf []byte) (ppid, pgrp int, ok bool) {
	fd, err := syscall.Open("/proc/"+strconv.Itoa(pid)+"/stat", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0, 0, false
	}
	n, err := syscall.Read(fd, buf)
	_ = syscall.Close(fd)
	if err != nil || n <= 0 {
		return 0, 0, false
	}
	b := buf[:n]
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	// After ") ": the state, then the parent, then the group.
	f := bytes.SplitN(b[i+1:], []byte{' '}, 5)
	if len(f) < 5 {
		return 0, 0, false
	}
	ppid, err1 := strconv.Atoi(string(f[2]))
	pgrp, err2 := strconv.Atoi(string(f[3]))
	return ppid, pgrp, err1 == nil && err2 == nil
}

// Cgroup is a container's agent: every process in its cgroup and the
// cgroups under it, and its memory controller's OOM kills. Both files
// are the kernel's: nothing in the container can write them.
type Cgroup struct {
	Root int
	// Dir holds cgroup.procs; Memory the memory controller's files
	// (the same dir under cgroup v2).
	Dir, Memory string
	v2          bool
}

// CgroupOf finds the cgroup of a container's first process (pid, a
// host pid) under mount (/sys/fs/cgroup), for cgroup v1 and v2.
func CgroupOf(pid int, mount string) (*Cgroup, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return nil, fmt.Errorf("cgroup of %d: %w", pid, err)
	}
	c := &Cgroup{Root: pid}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			if c.Memory == "" { // v2, unless a v1 memory controller is mounted (hybrid)
				c.Dir, c.Memory, c.v2 = filepath.Join(mount, parts[2]), filepath.Join(mount, parts[2]), true
			}
		case hasController(parts[1], "memory"):
			c.Dir, c.Memory, c.v2 = filepath.Join(mount, "memory", parts[2]), filepath.Join(mount, "memory", parts[2]), false
		}
	}
	if c.Dir == "" {
		return nil, fmt.Errorf("cgroup of %d: no memory controller or unified hierarchy in /proc/%d/cgroup", pid, pid)
	}
	if _, err := os.Stat(filepath.Join(c.Dir, "cgroup.procs")); err != nil {
		return nil, fmt.Errorf("cgroup of %d: %w", pid, err)
	}
	return c, nil
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

func (c *Cgroup) RootPID() int { return c.Root }

// PIDs reads cgroup.procs of the cgroup and of every cgroup under it.
func (c *Cgroup) PIDs() ([]int, error) {
	var out []int
	err := filepath.WalkDir(c.Dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			if p == c.Dir {
				return err
			}
			return nil // a child cgroup gone meanwhile
		}
		if !d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if err != nil {
			return nil
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				out = append(out, pid)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("processes of cgroup %s: %w", c.Dir, err)
	}
	return out, nil
}

// OOMKills reads oom_kill from memory.events (v2) or memory.oom_control
// (v1, Linux 4.13 and later).
func (c *Cgroup) OOMKills() (int, bool) {
	name := "memory.oom_control"
	if c.v2 {
		name = "memory.events"
	}
	b, err := os.ReadFile(filepath.Join(c.Memory, name))
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			return n, err == nil
		}
	}
	return 0, false
}

// procInfo is one sample of one process.
type procInfo struct {
	pid, ppid int
	ticks     uint64 // start, in clock ticks since boot: with pid, its identity
	start     time.Time
	cpuS      float64
	hwm       int64
	// cmd is the head of its command line (cmdlineRead bytes at most),
	// its arguments joined by spaces.
	cmd string
}

// cmdlineRead bounds what is read of a process's command line: what is
// kept (MaxCommand) and room for a secret straddling that cut to still be
// redacted whole. An agent's processes are agent data: a 1 MiB argv,
// forked to the pids limit, must not become a worker's gigabytes.
const cmdlineRead = MaxCommand + 4<<10

// readCmdline reads the head of pid's command line.
func readCmdline(pid int) string {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	buf := make([]byte, cmdlineRead)
	n, _ := io.ReadFull(f, buf)
	b := bytes.TrimRight(buf[:n], "\x00")
	for i, c := range b {
		if c == 0 {
			b[i] = ' '
		}
	}
	return string(b)
}

// userHZ is the clock tick of /proc/<pid>/stat's times (USER_HZ, 100 on
// every Linux ABI Go supports).
const userHZ = 100

func readProc(fs procfs.FS, boot time.Time, pid int) (procInfo, error) {
	p, err := fs.Proc(pid)
	if err != nil {
		return procInfo{}, err
	}
	st, err := p.Stat()
	if err != nil {
		return procInfo{}, err
	}
	pi := procInfo{pid: pid, ppid: st.PPID, ticks: st.Starttime, cpuS: st.CPUTime(),
		start: boot.Add(time.Duration(st.Starttime) * time.Second / userHZ)}
	if s, err := p.NewStatus(); err == nil {
		pi.hwm = int64(s.VmHWM)
	}
	if pi.hwm == 0 {
		pi.hwm = int64(st.ResidentMemory())
	}
	pi.cmd = readCmdline(pid)
	return pi, nil
}

// bootTime is when the host booted, to 10 ms (/proc/uptime): /proc/stat's
// btime is whole seconds, too coarse for processes a second long.
func bootTime() (time.Time, error) {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return time.Time{}, fmt.Errorf("boot time: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return time.Time{}, fmt.Errorf("boot time: /proc/uptime reads %q", b)
	}
	up, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("boot time: %w", err)
	}
	return time.Now().Add(-time.Duration(up * float64(time.Second))), nil
}

// Gone is the scope of an agent that had ended before it could be seen
// (an agent that puts a file in place and exits at once): it has no
// processes, but its checkpoints are observed like any other's.
type Gone struct{}

// PIDs: none.
func (Gone) PIDs() ([]int, error) { return nil, nil }

// RootPID: none.
func (Gone) RootPID() int { return 0 }

// OOMKills cannot be known.
func (Gone) OOMKills() (int, bool) { return 0, false }
