package gateway

import (
	"context"
	"fmt"
	"net"
	"os"
)

// Relay is the door's inside half, run in the container whose network
// the agent's shares (it has nothing but loopback): it accepts on listen
// and carries each connection to the worker's socket, where Gateway
// decides. It writes ready once it accepts, so that the agent starts only
// when its door is open.
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
		if err := os.WriteFile(ready, []byte(listen+"\n"), 0o644); err != nil {
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
	splice(up, c, c, up)
}
