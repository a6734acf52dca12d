package httpserve

import "testing"

func TestLoopbackAddr(t *testing.T) {
	cases := map[string]struct {
		reason string
		addr   string
		want   bool
	}{
		"IPv4":        {reason: "127.0.0.1 is loopback.", addr: "127.0.0.1:8480", want: true},
		"IPv4Range":   {reason: "All of 127/8 is loopback.", addr: "127.1.2.3:0", want: true},
		"IPv6":        {reason: "::1 is loopback.", addr: "[::1]:8480", want: true},
		"Localhost":   {reason: "localhost resolves to loopback.", addr: "localhost:8480", want: true},
		"NoHost":      {reason: "An empty host listens on every interface.", addr: ":8480"},
		"Unspecified": {reason: "0.0.0.0 listens on every interface.", addr: "0.0.0.0:0"},
		"IPv6Any":     {reason: ":: listens on every interface.", addr: "[::]:8480"},
		"Interface":   {reason: "Another address is reachable from elsewhere.", addr: "10.0.0.5:8480"},
		"Name":        {reason: "A name other than localhost may resolve anywhere.", addr: "cc.example:8480"},
		"NoPort":      {reason: "Not a listen address at all.", addr: "127.0.0.1"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := LoopbackAddr(tc.addr); got != tc.want {
				t.Errorf("%s\nLoopbackAddr(%q) = %v, want %v", tc.reason, tc.addr, got, tc.want)
			}
		})
	}
}
