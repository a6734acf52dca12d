package httpserve

import "net"

// LoopbackAddr reports whether a listen address (host:port) takes
// connections from this host only: a loopback IP or "localhost". An empty
// host, an unspecified IP (0.0.0.0, ::) or any other name listens beyond
// it.
func LoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
