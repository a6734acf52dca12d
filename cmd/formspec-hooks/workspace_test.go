package main

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/formspec/formspec-hooks/internal/handoff"
	"github.com/formspec/formspec-hooks/internal/server"
	"github.com/formspec/formspec-hooks/internal/testkit/testsync"
)

// TestSyncMakesNoNetworkCall serves Workspace syncs with the reporter
// hand-off pointed at a listener that fails the test on any connection.
// The hand-off's sender is not started, so nothing may connect: a sync
// reads only its request, and handing its observation over only queues it.
func TestSyncMakesNoNetworkCall(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var connects atomic.Int32
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			connects.Add(1)
			conn.Close()
		}
	}()
	defer ln.Close()
	client, err := handoff.New("http://"+ln.Addr().String(), handoff.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := fixtureConfig()
	cfg.reporterURL, cfg.reports = "http://"+ln.Addr().String(), client
	h := hookHandler(t, cfg, server.Config{})
	for _, name := range []string{"steady-ready", "artifact-hash-change", "credentials-mixed", "cluster-class-missing"} {
		body, err := os.ReadFile(filepath.Join(fixturesDir, "workspace", "sync", name, "request.json"))
		if err != nil {
			t.Fatal(err)
		}
		if rec := post(h, "/v1/workspace/sync", body, nil); rec.Code != http.StatusOK {
			t.Fatalf("%s: status %d: %s", name, rec.Code, rec.Body)
		}
	}
	// The listener accepts in order: once a connection of the test's own
	// is accepted, any the syncs dialled before it has been counted too.
	sentinel, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sentinel.Close()
	testsync.WaitFor(t, "the test's own connection to be accepted", func() bool { return connects.Load() >= 1 })
	if n := connects.Load() - 1; n != 0 {
		t.Errorf("the sync hooks opened %d connections; want none", n)
	}
}

// TestWorkspaceObjectLimit shows that the Workspace hooks' request type is
// held to --max-objects like every other: a sync carrying more children and
// related objects than the limit is refused before the hook runs.
func TestWorkspaceObjectLimit(t *testing.T) {
	h := hookHandler(t, fixtureConfig(), server.Config{MaxObjects: 2})
	for _, path := range []string{"/v1/workspace/sync", "/v1/workspace/finalize"} {
		body, err := os.ReadFile(filepath.Join(fixturesDir, "workspace", "sync", "steady-ready", "request.json"))
		if err != nil {
			t.Fatal(err)
		}
		if rec := post(h, path, body, nil); rec.Code != http.StatusRequestEntityTooLarge {
			t.Errorf("%s with 5 objects over a limit of 2: status %d (%q), want 413", path, rec.Code, rec.Body)
		}
	}
}
