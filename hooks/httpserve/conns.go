package httpserve

import (
	"net"
	"net/http"
	"sync"
)

// ProbeConns are the connection caps of a listener that answers only the
// kubelet's probes. The kubelet opens one connection per probe, two
// probes every few seconds; a few more are room for a person with curl.
var ProbeConns = ConnLimits{Max: 16, PerClient: 8, Idle: 4}

// ConnLimits caps the connections one listener keeps open. Timeouts bound
// how long one connection can be held; these bound how many, so that
// clients that open connections and send nothing useful (or keep them idle)
// cannot use up the process's file descriptors and memory. Zero fields take
// the defaults (Defaults.Conns); a negative field caps nothing.
type ConnLimits struct {
	// Max caps open connections. Beyond it the server stops accepting, and
	// the kernel queues new connections, until one closes: a legitimate
	// client waits a little rather than being refused.
	Max int
	// PerClient caps open connections from one client IP address; a
	// connection beyond it is closed at once. It keeps one client from
	// taking every connection under Max.
	PerClient int
	// Idle caps kept-alive connections waiting for their next request; a
	// connection that goes idle beyond it is closed (the client opens a new
	// one when it needs it).
	Idle int
}

func (l ConnLimits) wrap(ln net.Listener, srv *http.Server) net.Listener {
	if l.Idle > 0 {
		idle := &idleCap{max: l.Idle, idle: map[net.Conn]bool{}}
		srv.ConnState = idle.track
	}
	if l.Max <= 0 && l.PerClient <= 0 {
		return ln
	}
	ll := &limitListener{Listener: ln, limits: l, perClient: map[string]int{}, done: make(chan struct{})}
	if l.Max > 0 {
		ll.slots = make(chan struct{}, l.Max)
	}
	return ll
}

// limitListener enforces Max and PerClient at Accept.
type limitListener struct {
	net.Listener
	limits ConnLimits
	slots  chan struct{}

	mu        sync.Mutex
	perClient map[string]int

	closeOnce sync.Once
	done      chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		if l.slots != nil {
			select {
			case l.slots <- struct{}{}:
			case <-l.done:
				return nil, net.ErrClosed
			}
		}
		c, err := l.Listener.Accept()
		if err != nil {
			l.release()
			return nil, err
		}
		client := clientAddr(c)
		l.mu.Lock()
		over := l.limits.PerClient > 0 && l.perClient[client] >= l.limits.PerClient
		if !over {
			l.perClient[client]++
		}
		l.mu.Unlock()
		if over {
			_ = c.Close()
			l.release()
			continue
		}
		return &limitConn{Conn: c, l: l, client: client}, nil
	}
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

func (l *limitListener) release() {
	if l.slots != nil {
		<-l.slots
	}
}

func (l *limitListener) closed(client string) {
	l.mu.Lock()
	if l.perClient[client]--; l.perClient[client] <= 0 {
		delete(l.perClient, client)
	}
	l.mu.Unlock()
	l.release()
}

// clientAddr is the client's IP address: every port of one host counts as
// the same client.
func clientAddr(c net.Conn) string {
	addr := c.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

type limitConn struct {
	net.Conn
	l         *limitListener
	client    string
	closeOnce sync.Once
}

// CloseWrite shuts the write side of the TCP connection underneath. The
// server is done with the connection then: it only waits for the client
// to read the answer before closing it (see guard), so the connection no
// longer counts against the caps. A client whose refusals are lingering
// cannot fill them.
func (c *limitConn) CloseWrite() error {
	var err error
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		err = cw.CloseWrite()
	}
	c.closeOnce.Do(func() { c.l.closed(c.client) })
	return err
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(func() { c.l.closed(c.client) })
	return err
}

// idleCap closes connections that go idle while Idle others already are.
type idleCap struct {
	max  int
	mu   sync.Mutex
	idle map[net.Conn]bool
}

func (ic *idleCap) track(c net.Conn, state http.ConnState) {
	ic.mu.Lock()
	over := false
	switch state {
	case http.StateIdle:
		over = len(ic.idle) >= ic.max
		if !over {
			ic.idle[c] = true
		}
	default:
		delete(ic.idle, c)
	}
	ic.mu.Unlock()
	if over {
		// What Shutdown does to idle connections too; the server's
		// goroutine for c sees the closed connection and ends.
		_ = c.Close()
	}
}
