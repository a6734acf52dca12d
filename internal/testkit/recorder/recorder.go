// Package recorder is the one observation sink of the hooks' tests: it
// keeps what a hook hands over to the reporter, in order, so that a test
// can compare it with what it wants.
package recorder

import "github.com/formspec/formspec-hooks/hooks/api/observation"

// Sink is an observation.Sink that keeps every observation it is sent.
// It is for one goroutine, as a hook call in a test is.
type Sink struct {
	Sent []observation.Observation
}

// Send keeps o.
func (s *Sink) Send(o observation.Observation) { s.Sent = append(s.Sent, o) }
