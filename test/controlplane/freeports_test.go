package controlplane

import (
	"net"
	"strconv"
	"testing"
)

// TestFreePorts checks that the ports are distinct, below the kernel's
// ephemeral range, where no outgoing connection takes its source port, and
// can be listened on by every interface once FreePorts has let them go.
func TestFreePorts(t *testing.T) {
	high := ephemeralLow()
	ports := FreePorts(t, 8)
	if len(ports) != 8 {
		t.Fatalf("got %d ports, want 8: %v", len(ports), ports)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Errorf("port %d given twice: %v", p, ports)
		}
		seen[p] = true
		if p < 10000 || p >= high {
			t.Errorf("port %d is outside [10000, %d), below the ephemeral range", p, high)
		}
		l, err := net.Listen("tcp", ":"+strconv.Itoa(p))
		if err != nil {
			t.Errorf("port %d is not free on every interface: %v", p, err)
			continue
		}
		_ = l.Close()
	}
}
