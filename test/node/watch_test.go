package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// watchEvent is one event of a Kubernetes watch. Type is ADDED, MODIFIED
// or DELETED, or LISTED for an object of the list a watch starts from.
type watchEvent struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// watch follows a collection (an API path such as
// /apis/formspec.dev/v1alpha1/workspaces) until ctx ends, handing every
// object to onEvent: first each object of a list, then every change from
// the list's resourceVersion on. A watch that breaks (the API server
// restarting, a 410 Gone) lists again and goes on, so onEvent sees the
// state after any gap, if not every change during it; the returned
// channel says how many gaps there were once ctx ends. A collection not
// served yet (a CRD not installed) is listed again until it is.
func (c *Cluster) watch(ctx context.Context, path string, onEvent func(watchEvent)) <-chan int {
	done := make(chan int, 1)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.CACert)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	get := func(ctx context.Context, query string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL+path+"?"+query, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+c.Token)
		resp, err := client.Do(req)
		if err == nil && resp.StatusCode != http.StatusOK {
			_ = resp.Body.Close()
			return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		return resp, err
	}
	go func() {
		gaps, listed := 0, false
		defer func() { done <- gaps }()
		for ctx.Err() == nil {
			rv, err := c.listInto(ctx, get, onEvent)
			if err != nil {
				// The API server is down, or does not serve the
				// collection yet (its CRD is not installed).
				sleepCtx(ctx, 500*time.Millisecond)
				continue
			}
			if listed {
				gaps++
			}
			listed = true
			resp, err := get(ctx, "watch=1&allowWatchBookmarks=true&timeoutSeconds=600&resourceVersion="+url.QueryEscape(rv))
			if err != nil {
				sleepCtx(ctx, 500*time.Millisecond)
				continue
			}
			dec := json.NewDecoder(resp.Body)
			for {
				var ev watchEvent
				if err := dec.Decode(&ev); err != nil || ev.Type == "ERROR" {
					break
				}
				if ev.Type != "BOOKMARK" {
					onEvent(ev)
				}
			}
			_ = resp.Body.Close()
		}
	}()
	return done
}

// listInto lists the collection, hands each item to onEvent as LISTED and
// returns the list's resourceVersion.
func (c *Cluster) listInto(ctx context.Context, get func(context.Context, string) (*http.Response, error), onEvent func(watchEvent)) (string, error) {
	resp, err := get(ctx, "")
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	var list struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Items []json.RawMessage `json:"items"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return "", err
	}
	for _, item := range list.Items {
		onEvent(watchEvent{Type: "LISTED", Object: item})
	}
	return list.Metadata.ResourceVersion, nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
