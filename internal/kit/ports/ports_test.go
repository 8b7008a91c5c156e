package ports

import (
	"net"
	"strconv"
	"testing"
)

func TestReservedPortsAreOutsideTheEphemeralRangeAndExclusive(t *testing.T) {
	elo, ehi, err := ephemeralRange()
	if err != nil {
		t.Skip("no /proc ephemeral range:", err)
	}
	seen := map[int]bool{}
	var held []*Port
	for i := 0; i < 50; i++ {
		p, err := Reserve("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, p)
		if p.Number >= elo && p.Number <= ehi {
			t.Fatalf("port %d is in the ephemeral range %d-%d", p.Number, elo, ehi)
		}
		if seen[p.Number] {
			t.Fatalf("port %d handed out twice while held", p.Number)
		}
		seen[p.Number] = true
		// Held means locked: nobody else may lock it meanwhile.
		if f, err := tryLock(p.Number); err == nil {
			_ = f.Close()
			t.Fatalf("port %d could be locked again while held", p.Number)
		}
	}
	p := held[0]
	p.Release()
	p.Release() // twice is harmless
	f, err := tryLock(p.Number)
	if err != nil {
		t.Fatalf("a released port stays locked: %v", err)
	}
	_ = f.Close()
	for _, p := range held[1:] {
		p.Release()
	}
}

func TestReservedPortBinds(t *testing.T) {
	p, err := Reserve("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p.Number))
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
}
