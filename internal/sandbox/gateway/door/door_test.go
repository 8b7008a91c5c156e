package door

import (
	"bufio"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRelayCarriesToTheSocket: the relay writes where it accepts to its
// ready file, carries a connection both ways to the worker's socket, and
// stops with its context.
func TestRelayCarriesToTheSocket(t *testing.T) {
	dir := t.TempDir()
	socket, ready := filepath.Join(dir, "door.sock"), filepath.Join(dir, "ready")
	ul, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ul.Close() }()
	go func() {
		c, err := ul.Accept()
		if err != nil {
			return
		}
		defer func() { _ = c.Close() }()
		line, _ := bufio.NewReader(c).ReadString('\n')
		_, _ = c.Write([]byte("worker heard " + line))
	}()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Relay(ctx, "127.0.0.1:0", socket, ready) }()
	var said []byte
	for deadline := time.Now().Add(10 * time.Second); !strings.HasSuffix(string(said), "\n") && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		said, _ = os.ReadFile(ready)
	}
	listen := strings.TrimSpace(string(said))
	if !strings.HasPrefix(listen, "127.0.0.1:") || strings.HasSuffix(listen, ":0") {
		t.Fatalf("ready says %q", said)
	}
	c, err := net.Dial("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if _, err := c.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || got != "worker heard hello\n" {
		t.Fatalf("through the door: %q, %v", got, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("relay stopped with %v", err)
	}
}
