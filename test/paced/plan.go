package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
)

// call is one hook call: a path and its body.
type call struct {
	path string
	body []byte
}

// The fixtures a converging fleet's calls are made of, the ones
// coldcache.Calls and the trivial hook's answers come from.
const (
	fixtureSync           = "workspace/sync/first-sync"
	fixtureCustomize      = "workspace/customize/class-only"
	fixtureClaimSync      = "resourceclaim/sync/granted-v2"
	fixtureClaimCustomize = "resourceclaim/customize/same-namespace"
)

// The name and uid of the fixtures' Workspace, which plan makes unique per
// workspace so that the hand-off queue keeps one state per workspace, as
// in a fleet, instead of merging them into one.
const (
	fixtureName = `"acme"`
	fixtureUID  = "6f1c2f0e-3b7a-4d52-9c1e-0d6a1f2b3c4d"
)

// claimEvery is TestScale's share of workspaces with a claim.
const claimEvery = 10

// calls are the fixtures' bodies.
type calls struct {
	sync, customize, claimSync, claimCustomize []byte
}

func loadCalls(dir string) (calls, error) {
	var c calls
	for _, f := range []struct {
		fixture string
		into    *[]byte
	}{{fixtureSync, &c.sync}, {fixtureCustomize, &c.customize}, {fixtureClaimSync, &c.claimSync}, {fixtureClaimCustomize, &c.claimCustomize}} {
		b, err := os.ReadFile(fixtureFile(dir, f.fixture, "request.json"))
		if err != nil {
			return calls{}, fmt.Errorf("%w (run from the repository's root, or set -fixtures)", err)
		}
		*f.into = b
	}
	for _, b := range [][]byte{c.sync, c.customize} {
		if !bytes.Contains(b, []byte(fixtureName)) || !bytes.Contains(b, []byte(fixtureUID)) {
			return calls{}, fmt.Errorf("the workspace fixtures no longer name %s with uid %s: update test/paced", fixtureName, fixtureUID)
		}
	}
	return c, nil
}

// plan is what each round posts, workspace by workspace: the customize and
// the first sync of each, and for every claimEvery-th also its claim's
// customize and two syncs (its grant, then the resync that finds the
// credentials Secret), keeping only the calls whose path contains only.
// The claim calls are the fixture's for every workspace: renaming a claim
// would break its signature.
func plan(c calls, workspaces int, only string) [][]call {
	var out [][]call
	for i := range workspaces {
		ws := []call{
			{"/v1/workspace/customize", rename(c.customize, i)},
			{"/v1/workspace/sync", rename(c.sync, i)},
		}
		if i%claimEvery == 0 {
			ws = append(ws,
				call{"/v1/resourceclaim/customize", c.claimCustomize},
				call{"/v1/resourceclaim/sync", c.claimSync},
				call{"/v1/resourceclaim/sync", c.claimSync})
		}
		ws = keep(ws, only)
		if len(ws) > 0 {
			out = append(out, ws)
		}
	}
	return out
}

func keep(ws []call, only string) []call {
	var out []call
	for _, c := range ws {
		if strings.Contains(c.path, only) {
			out = append(out, c)
		}
	}
	return out
}

// rename gives the fixture's Workspace the i-th name and uid: names of the
// same length as a fleet's, a uid that stays a uid.
func rename(body []byte, i int) []byte {
	body = bytes.ReplaceAll(body, []byte(fixtureName), fmt.Appendf(nil, `"acme-%05d"`, i))
	return bytes.ReplaceAll(body, []byte(fixtureUID), fmt.Appendf(nil, "%s%05d", fixtureUID[:len(fixtureUID)-5], i))
}
