// Command paced measures the hook server's CPU per call against the
// trivial hook's (test/e2e/trivialhook) the way TestScale sees it, in about
// a minute and a half instead of a fleet run's five: it posts the calls of
// a converging fleet at Metacontroller's pace, over TLS with a small idle
// pool, to both servers side by side, and reads the CPU each server's
// process spent from /proc. It prints figures and asserts none (docs/performance.md,
// "Paced calls").
//
// A fleet's hook calls arrive far apart: between two calls each server
// sleeps, so a call pays for waking the process and for finding its code
// and data out of the caches, which a benchmark loop never does. At 50
// workspaces a second this is TestScale's converge phase: the same mix of
// calls (per workspace a customize and a first sync; for every tenth a
// claim's customize and two claim syncs), about the same CPU per call.
// The ratio between the two servers follows how busy the host is, for
// both tools: only figures of one run compare.
//
//	go build -o /tmp/fh ./cmd/formspec-hooks
//	go build -o /tmp/trivial ./test/e2e/trivialhook
//	go run ./test/paced -hooks /tmp/fh -trivial /tmp/trivial
//
// The hook server runs as deployed (TLS, a bearer token, a hand-off to a
// reporter, which here is a stub that accepts every batch); the trivial
// hook answers with the hook server's own answers (--answer-like and
// --claim-answer-like, as FORMSPEC_E2E_SCALE_TRIVIAL_ANSWER=hooks-with-claims
// has it), so both send the same bytes back.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "paced:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	hooksBin, trivialBin, fixtures string
	// alsoBin is another hook server build to measure beside hooksBin.
	alsoBin                  string
	workspaces, rate, rounds int
	idle                     int
	only                     string
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("paced", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.hooksBin, "hooks", "", "formspec-hooks binary (required)")
	fs.StringVar(&o.trivialBin, "trivial", "", "test/e2e/trivialhook binary (required)")
	fs.StringVar(&o.alsoBin, "also", "", "another formspec-hooks binary (a build of a change) to measure beside -hooks, as \"also\"")
	fs.StringVar(&o.fixtures, "fixtures", "fixtures", "fixtures directory")
	fs.IntVar(&o.workspaces, "workspaces", 1000, "workspaces whose calls each round posts")
	fs.IntVar(&o.rate, "rate", 50, "workspaces a second whose calls are posted; each brings two calls, five if it has a claim (fewer with -only)")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds; each posts to every server at once, which one gets each workspace's calls first rotating by round")
	fs.IntVar(&o.idle, "idle-conns", 2, "idle connections the client keeps, as Metacontroller's (Go's default); 0 opens a connection, and so a TLS handshake, for every call")
	fs.StringVar(&o.only, "only", "", "post only the calls whose path contains this (e.g. resourceclaim)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.hooksBin == "" || o.trivialBin == "" {
		return errors.New("-hooks and -trivial are required: build ./cmd/formspec-hooks and ./test/e2e/trivialhook")
	}
	if o.workspaces < 1 || o.rate < 1 || o.rounds < 1 || o.idle < 0 {
		return errors.New("want -workspaces, -rate and -rounds of at least 1, and -idle-conns of at least 0")
	}
	calls, err := loadCalls(o.fixtures)
	if err != nil {
		return err
	}
	plan := plan(calls, o.workspaces, o.only)
	if len(plan) == 0 {
		return fmt.Errorf("-only %q matches no call", o.only)
	}
	dir, err := os.MkdirTemp("", "paced-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	env, err := newEnv(dir)
	if err != nil {
		return err
	}
	defer env.close()

	servers := []serverSpec{
		{name: "formspec-hooks", command: env.hooksCommand(o.hooksBin)},
		{name: "trivial", command: env.trivialCommand(o.trivialBin, o.fixtures)},
	}
	if o.alsoBin != "" {
		servers = append(servers, serverSpec{name: "also", command: env.hooksCommand(o.alsoBin)})
	}
	fmt.Fprintf(stdout, "%d workspaces with calls to post, at %d a second, %d calls a round, %d idle connections, %d rounds\n",
		len(plan), o.rate, countCalls(plan), o.idle, o.rounds)
	perCall, firsts := map[string][]float64{}, map[string][]float64{}
	for r := range o.rounds {
		// Which server's calls go first in each tick changes by round.
		k := r % len(servers)
		order := append(slices.Clone(servers[k:]), servers[:k]...)
		ms, handoffs, err := env.measure(context.Background(), order, plan, o)
		if err != nil {
			return fmt.Errorf("round %d: %w", r+1, err)
		}
		for i, m := range ms {
			name := order[i].name
			fmt.Fprintf(stdout, "round %d  %-15s %5d calls in %5.1fs  CPU %.2fs  %6.1f µs a call  (%d failed, %d TLS handshakes; first %d calls %.1f ms)\n",
				r+1, name, m.calls, m.elapsed.Seconds(), m.cpu.Seconds(), m.perCall(), m.failed, m.handshakes, len(plan[0]), float64(m.first.Microseconds())/1000)
			firsts[name] = append(firsts[name], float64(m.first.Microseconds())/1000)
			perCall[name] = append(perCall[name], m.perCall())
		}
		fmt.Fprintf(stdout, "round %d  hand-off POSTs from the hook servers: %d\n", r+1, handoffs)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	t := median(perCall["trivial"])
	fmt.Fprintln(tw, "median of the rounds\tCPU a call (µs)\tagainst the trivial hook\tfirst calls (ms)\t")
	for _, s := range servers {
		m := median(perCall[s.name])
		fmt.Fprintf(tw, "%s\t%.1f\t%.2f\t%.1f\t\n", s.name, m, m/t, median(firsts[s.name]))
	}
	if o.alsoBin != "" {
		fmt.Fprintf(tw, "also against formspec-hooks\t\t%.2f\t\n", median(perCall["also"])/median(perCall["formspec-hooks"]))
	}
	return tw.Flush()
}

// serverSpec is one of the servers measured (the hook server, the trivial
// hook, and with -also a second hook server build): how to start it on a
// listener and a metrics listener.
type serverSpec struct {
	name    string
	command func(listen, metrics string) *exec.Cmd
}

// measured is what one round of one server measured.
type measured struct {
	calls, failed int
	// handshakes are the connections the client opened.
	handshakes int64
	elapsed    time.Duration
	cpu        time.Duration
	// first is how long the server's first calls took: one workspace's,
	// posted one after the other as soon as it was ready, on a new
	// connection.
	first time.Duration
}

func (m measured) perCall() float64 {
	return m.cpu.Seconds() / float64(max(m.calls, 1)) * 1e6
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// fixtureFile is a file of a fixture (request.json, response.json) under
// dir.
func fixtureFile(dir, fixture, file string) string {
	return filepath.Join(dir, filepath.FromSlash(fixture), file)
}

func countCalls(plan [][]call) int {
	n := 0
	for _, w := range plan {
		n += len(w)
	}
	return n
}
