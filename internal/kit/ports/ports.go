// Ports held for a server's life, out of the kernel's ephemeral range.

// Package ports hands out TCP ports that stay free for as long as they are
// held. A port found by listening on :0 and closing it comes from the
// kernel's ephemeral range, where any outgoing connection of any process
// may take it before the server binds it (or binds it again after a
// restart). Ports here come from below that range, where the kernel never
// picks client ports, and each is held by an flock on a file shared by
// every mlrb process on the machine, so that two of them never pick the
// same one. A process that dies releases its locks with it.
package ports

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Port is a held port.
type Port struct {
	Number int
	lock   *os.File
	once   sync.Once
}

// Release lets other mlrb processes take the port again.
func (p *Port) Release() {
	p.once.Do(func() { _ = p.lock.Close() })
}

// LockDir is where the port locks live; one per machine, shared by users.
func LockDir() string { return filepath.Join(os.TempDir(), "mlrb-ports") }

// Reserve picks a port on ip that no other mlrb process holds, that is
// bindable now, and that the kernel will not hand to a client socket.
func Reserve(ip string) (*Port, error) {
	lo, hi := candidates()
	if err := os.MkdirAll(LockDir(), 0o777); err != nil {
		return nil, fmt.Errorf("ports: lock dir: %w", err)
	}
	_ = os.Chmod(LockDir(), 0o1777) // several users share the machine's port space
	n := hi - lo
	start := rand.IntN(n)
	for i := 0; i < n; i++ {
		port := lo + (start+i)%n
		f, err := tryLock(port)
		if err != nil {
			continue
		}
		if bindable(ip, port) {
			return &Port{Number: port, lock: f}, nil
		}
		_ = f.Close()
	}
	return nil, fmt.Errorf("ports: no free port in %d-%d on %s", lo, hi-1, ip)
}

func tryLock(port int) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(LockDir(), strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

func bindable(ip string, port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		return false
	}
	return l.Close() == nil
}

// candidates is the range [lo, hi) to pick from: the 12,000 ports below
// the kernel's ephemeral range (32768-60999 by default), or above it when
// it starts too low to leave room.
func candidates() (lo, hi int) {
	elo, ehi, err := ephemeralRange()
	if err != nil {
		elo, ehi = 32768, 60999
	}
	const span = 12000
	if elo-span >= 1024 {
		return elo - span, elo
	}
	if ehi+1+span <= 65536 {
		return ehi + 1, ehi + 1 + span
	}
	return 1024, elo // a range this wide leaves nothing else
}

func ephemeralRange() (int, int, error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0, errors.New("ports: unreadable ip_local_port_range")
	}
	lo, err1 := strconv.Atoi(f[0])
	hi, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil {
		return 0, 0, errors.New("ports: unreadable ip_local_port_range")
	}
	return lo, hi, nil
}
