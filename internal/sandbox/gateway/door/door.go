// The door's relay inside the agent's network, and the copy between its halves.

// Package door is the gateway's door: the relay that carries an agent's
// connections from inside its container to the worker's socket, and the
// copy both halves share. It stands apart from the gateway so that the
// small agent binary (cmd/mlrb-agent) holds nothing else of it.
package door

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
)

// Relay is the door's inside half, run in the container whose network
// the agent's shares (it has nothing but loopback): it accepts on listen
// and carries each connection to the worker's socket, where Gateway
// decides. It writes ready (the address it accepts on) once it accepts,
// so that the agent starts only when its door is open.
func Relay(ctx context.Context, listen, socket, ready string) error {
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("door: %w", err)
	}
	go func() {
		<-ctx.Done()
		_ = l.Close()
	}()
	if ready != "" {
		if err := os.WriteFile(ready, []byte(l.Addr().String()+"\n"), 0o644); err != nil {
			return fmt.Errorf("door: %w", err)
		}
	}
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("door: %w", err)
		}
		go relay(c, socket)
	}
}

func relay(c net.Conn, socket string) {
	defer func() { _ = c.Close() }()
	up, err := net.Dial("unix", socket)
	if err != nil {
		return
	}
	defer func() { _ = up.Close() }()
	Splice(up, c, c, up)
}

// Splice copies b into a and d into c at once, each side's write end
// closed when its source ends, and returns the bytes of each.
func Splice(a net.Conn, b io.Reader, c net.Conn, d io.Reader) (int64, int64) {
	var ab, cd int64
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		ab, _ = io.Copy(a, b)
		closeWrite(a)
	}()
	go func() {
		defer wg.Done()
		cd, _ = io.Copy(c, d)
		closeWrite(c)
	}()
	wg.Wait()
	return ab, cd
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}
