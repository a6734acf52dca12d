package httpserve

import (
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"time"
)

// ProbeConns are the connection caps of a listener that answers only the
// kubelet's probes. The kubelet opens one connection per probe, two
// probes every few seconds; a few more are room for a person with curl.
var ProbeConns = ConnLimits{Max: 16, PerClient: 8, Idle: 4, Streams: 4}

// ConnLimits caps the connections one listener keeps open, and the
// requests they carry. Timeouts bound how long one connection can be
// held; these bound how many, so that clients that open connections and
// send nothing useful (or keep them idle) cannot use up the process's file
// descriptors and memory. Zero fields take the defaults (Defaults.Conns);
// a negative field caps nothing.
//
// An HTTP/1.1 connection carries one request at a time, so capping
// connections caps requests. An HTTP/2 connection carries up to Streams
// at once, so Max and PerClient count it once for each request it carries
// at once (and once when it carries none): whatever protocol a client
// speaks, it holds no more requests at once than over HTTP/1.1, and so no
// more goroutines, buffers and in-flight budget.
type ConnLimits struct {
	// Max caps open connections (an HTTP/2 one counting once for each
	// request it carries at once). Beyond it the server stops accepting
	// (the kernel queues new connections, and the server holds the one
	// it accepted last) until one closes: a legitimate client waits a
	// little rather than being refused. A request beyond it on an HTTP/2
	// connection already open gets 429.
	Max int
	// PerClient caps open connections from one client IP address (an
	// HTTP/2 one counting once for each request it carries at once); a
	// connection beyond it is closed at once, a request beyond it on an
	// HTTP/2 connection gets 429. It keeps one client from taking every
	// connection under Max.
	PerClient int
	// Idle caps kept-alive connections waiting for their next request
	// (HTTP/2: with no request in progress); a connection that goes idle
	// beyond it is closed (the client opens a new one when it needs it).
	Idle int
	// Streams caps the requests one HTTP/2 connection carries at once,
	// the SETTINGS_MAX_CONCURRENT_STREAMS the server announces. It also
	// bounds what a rapid reset can start on one connection: Go's server
	// runs at most Streams handlers per connection, queues at most four
	// times as many requests whose streams the client has already reset,
	// and ends the connection (GOAWAY, ENHANCE_YOUR_CALM) beyond that.
	Streams int
}

// caps counts what a listener holds against Max and PerClient: its
// connections, and the HTTP/2 requests in progress on them.
type caps struct {
	limits ConnLimits
	slots  chan struct{}

	mu        sync.Mutex
	perClient map[string]int
}

// newCaps returns the caps of l, or nil when l caps neither Max nor
// PerClient.
func newCaps(l ConnLimits) *caps {
	if l.Max <= 0 && l.PerClient <= 0 {
		return nil
	}
	c := &caps{limits: l, perClient: map[string]int{}}
	if l.Max > 0 {
		c.slots = make(chan struct{}, l.Max)
	}
	return c
}

// wait takes a slot under Max, waiting until one is free or done closes.
func (c *caps) wait(done <-chan struct{}) bool {
	if c.slots == nil {
		return true
	}
	select {
	case c.slots <- struct{}{}:
		return true
	case <-done:
		return false
	}
}

// tryTake takes a slot under Max without waiting.
func (c *caps) tryTake() bool {
	if c.slots == nil {
		return true
	}
	select {
	case c.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

func (c *caps) releaseSlot() {
	if c.slots != nil {
		<-c.slots
	}
}

// takeClient counts one more connection or request of client under
// PerClient; false, and nothing counted, when it is over.
func (c *caps) takeClient(client string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.limits.PerClient > 0 && c.perClient[client] >= c.limits.PerClient {
		return false
	}
	c.perClient[client]++
	return true
}

// release gives back a slot and client's count.
func (c *caps) release(client string) {
	c.mu.Lock()
	if c.perClient[client]--; c.perClient[client] <= 0 {
		delete(c.perClient, client)
	}
	c.mu.Unlock()
	c.releaseSlot()
}

// Reasons of a Refusal of kind RefusedHTTP2: a request over PerClient or
// over Max, answered 429, and the reason Go's HTTP/2 server gives when it
// ends a connection for a rapid reset (GOAWAY, ENHANCE_YOUR_CALM). Every
// other error Go's server counts is a reason too, as it names it, in
// lower case.
const (
	HTTP2StreamsPerClient = "streams-per-client"
	HTTP2StreamsMax       = "streams-max"
	HTTP2RapidReset       = "conn_enhance_your_calm_too_many_early_resets"
)

// takeStream counts an HTTP/2 request of client against the caps without
// waiting: a request already sent cannot be left in the kernel's accept
// queue as a connection can. It returns the reason when it is over.
func (c *caps) takeStream(client string) (over string) {
	if c == nil {
		return ""
	}
	if !c.tryTake() {
		return HTTP2StreamsMax
	}
	if !c.takeClient(client) {
		c.releaseSlot()
		return HTTP2StreamsPerClient
	}
	return ""
}

// listener wraps ln so that Accept takes a slot for each connection.
func (c *caps) listener(ln net.Listener) net.Listener {
	if c == nil {
		return ln
	}
	return &limitListener{Listener: ln, caps: c, done: make(chan struct{})}
}

// limitListener enforces Max and PerClient at Accept.
type limitListener struct {
	net.Listener
	caps *caps

	closeOnce sync.Once
	done      chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		// The slot is taken after Accept, not kept in reserve for the
		// next connection: HTTP/2 requests may need it meanwhile.
		if !l.caps.wait(l.done) {
			_ = c.Close()
			return nil, net.ErrClosed
		}
		client := clientAddr(c.RemoteAddr().String())
		if !l.caps.takeClient(client) {
			_ = c.Close()
			l.caps.releaseSlot()
			continue
		}
		return &limitConn{Conn: c, caps: l.caps, client: client}, nil
	}
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// clientAddr is the IP address of a client at addr (a RemoteAddr): every
// port of one host counts as the same client.
func clientAddr(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

type limitConn struct {
	net.Conn
	caps      *caps
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
	c.closeOnce.Do(func() { c.caps.release(c.client) })
	return err
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(func() { c.caps.release(c.client) })
	return err
}

// connStates follows every connection through http.Server.ConnState:
// it closes connections that go idle while Idle others already are (when
// Idle is positive), and an HTTP/2 connection that starts no request
// within the header timeout of its preface.
//
// Go's HTTP/2 server calls a connection idle as soon as it has read the
// client's preface, before its first request. Such a connection is not
// idle-capped (a legitimate client would lose its new connection to the
// cap whenever others hold every idle place), but it gets the time an
// HTTP/1.1 connection gets to send its first request's headers: a client
// that connects and says nothing holds either no longer. And it calls a
// connection idle when its last answer is written to the connection's
// buffer, before the buffer is flushed: an HTTP/2 connection over the cap
// is closed only if it is still idle http2IdleGrace later, so that the
// answer reaches the client.
type connStates struct {
	maxIdle      int
	firstRequest time.Duration

	mu   sync.Mutex
	idle map[net.Conn]bool
	// timers close connections: the HTTP/2 connections that have not
	// started a request (nil until their preface is read), and the
	// HTTP/2 connections idle over the cap.
	fresh, closing map[net.Conn]*time.Timer
}

// http2IdleGrace is how long an HTTP/2 connection over the idle cap stays
// open before it is closed: what Go's HTTP/2 server waits between its
// GOAWAY and closing a connection, for the last bytes to reach the
// client.
const http2IdleGrace = time.Second

func newConnStates(maxIdle int, firstRequest time.Duration) *connStates {
	return &connStates{
		maxIdle: maxIdle, firstRequest: firstRequest,
		idle: map[net.Conn]bool{}, fresh: map[net.Conn]*time.Timer{}, closing: map[net.Conn]*time.Timer{},
	}
}

func (cs *connStates) track(c net.Conn, state http.ConnState) {
	// Only an HTTP/2 connection reaches the server as a *tls.Conn
	// (connListener).
	_, h2 := c.(*tls.Conn)
	if cs.update(c, state, h2) {
		// What Shutdown does to idle connections too; the server's
		// goroutine for c sees the closed connection and ends.
		_ = c.Close()
	}
}

// update notes c's new state and reports whether to close c now.
func (cs *connStates) update(c net.Conn, state http.ConnState, h2 bool) (closeNow bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	timer, fresh := cs.fresh[c]
	if t := cs.closing[c]; t != nil && state != http.StateIdle {
		t.Stop()
		delete(cs.closing, c)
	}
	switch state {
	case http.StateNew:
		if h2 {
			cs.fresh[c] = nil
		}
	case http.StateIdle:
		if fresh && timer == nil {
			cs.fresh[c] = time.AfterFunc(cs.firstRequest, func() { _ = c.Close() })
			return false
		}
		if cs.maxIdle <= 0 || len(cs.idle) < cs.maxIdle {
			cs.idle[c] = true
			return false
		}
		if !h2 {
			return true
		}
		cs.closing[c] = time.AfterFunc(http2IdleGrace, func() {
			cs.mu.Lock()
			_, still := cs.closing[c]
			delete(cs.closing, c)
			cs.mu.Unlock()
			if still {
				_ = c.Close()
			}
		})
	case http.StateActive:
		delete(cs.idle, c)
		if timer != nil {
			// Its first request: from now on it is any connection.
			timer.Stop()
			delete(cs.fresh, c)
		}
	default:
		delete(cs.idle, c)
		if timer != nil {
			timer.Stop()
		}
		delete(cs.fresh, c)
	}
	return false
}
