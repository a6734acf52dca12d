package controlplane

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Object is a Kubernetes object as decoded JSON.
type Object = map[string]any

// waitTimeout bounds InstallCRDs' wait for a CRD to be served; a guard
// against a broken CRD, not a performance assertion.
const waitTimeout = time.Minute

// Client is a minimal JSON client for the Kubernetes API. It maps kinds to
// resource paths with discovery (/api, /apis), refreshing on a miss so that
// newly installed CRDs are found.
type Client struct {
	base  string
	token string
	http  *http.Client

	mu    sync.Mutex
	kinds map[string]resource // by apiVersion + "/" + kind
}

// resource is where a kind is served.
type resource struct {
	groupVersionPath string // /api/v1 or /apis/<group>/<version>
	name             string // plural
	namespaced       bool
}

// NewClient returns a client for the API server at base (https://host:port)
// authenticating with a bearer token and trusting the PEM CA certificate.
func NewClient(base, token string, caPEM []byte) (*Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("no CA certificate in PEM data")
	}
	return &Client{
		base:  strings.TrimSuffix(base, "/"),
		token: token,
		http: &http.Client{
			Timeout: time.Minute,
			Transport: &http.Transport{
				TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
			},
		},
	}, nil
}

// APIError is a response other than 2xx. Status is the decoded
// metav1.Status when the body was one.
type APIError struct {
	Method string
	Path   string
	Code   int
	Status metav1.Status
	Body   string
}

// Error returns the API server's message, or the body when there was none.
func (e *APIError) Error() string {
	msg := e.Status.Message
	if msg == "" {
		msg = strings.TrimSpace(e.Body)
	}
	return fmt.Sprintf("%s %s: %d: %s", e.Method, e.Path, e.Code, msg)
}

// IsNotFound reports whether err is an APIError with code 404.
func IsNotFound(err error) bool {
	var apiErr *APIError
	return errors.As(err, &apiErr) && apiErr.Code == http.StatusNotFound
}

// Do sends a request with an optional body ([]byte is sent as is, anything
// else is JSON-encoded) and returns the response body, or an *APIError for
// a non-2xx response.
func (c *Client) Do(method, path string, body any) ([]byte, error) {
	var raw []byte
	switch b := body.(type) {
	case nil:
	case []byte:
		raw = b
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			return nil, fmt.Errorf("cannot encode request body: %w", err)
		}
	}
	return c.do(method, path, "application/json", raw)
}

func (c *Client) do(method, path, contentType string, body []byte) ([]byte, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, c.base+path, r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("cannot read response to %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		apiErr := &APIError{Method: method, Path: path, Code: resp.StatusCode, Body: string(out)}
		_ = json.Unmarshal(out, &apiErr.Status)
		return nil, apiErr
	}
	return out, nil
}

func (c *Client) object(method, path, contentType string, body []byte) (Object, error) {
	out, err := c.do(method, path, contentType, body)
	if err != nil {
		return nil, err
	}
	var obj Object
	if err := json.Unmarshal(out, &obj); err != nil {
		return nil, fmt.Errorf("cannot decode response to %s %s: %w", method, path, err)
	}
	return obj, nil
}

// Create creates obj and returns the stored object.
func (c *Client) Create(obj Object) (Object, error) { return c.create(obj, false) }

// DryRunCreate runs obj through defaulting, validation and admission
// (dryRun=All) without storing it, and returns what would be stored.
func (c *Client) DryRunCreate(obj Object) (Object, error) { return c.create(obj, true) }

func (c *Client) create(obj Object, dryRun bool) (Object, error) {
	apiVersion, kind, namespace, _ := identity(obj)
	path, err := c.ResourcePath(apiVersion, kind, namespace, "")
	if err != nil {
		return nil, err
	}
	if dryRun {
		path += "?dryRun=All"
	}
	body, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return c.object(http.MethodPost, path, "application/json", body)
}

// Get returns the named object.
func (c *Client) Get(apiVersion, kind, namespace, name string) (Object, error) {
	path, err := c.ResourcePath(apiVersion, kind, namespace, name)
	if err != nil {
		return nil, err
	}
	return c.object(http.MethodGet, path, "", nil)
}

// Delete deletes the named object with foreground propagation, so that
// with a garbage collector running its dependents go first.
func (c *Client) Delete(apiVersion, kind, namespace, name string) error {
	return c.DeleteWithPropagation(apiVersion, kind, namespace, name, "Foreground")
}

// DeleteWithPropagation deletes the named object with the given
// propagationPolicy (Foreground, Background or Orphan). Background is what
// kubectl does: the object's own finalizers run before the garbage
// collector touches its dependents, which is what a controller with a
// finalize hook expects.
func (c *Client) DeleteWithPropagation(apiVersion, kind, namespace, name, policy string) error {
	path, err := c.ResourcePath(apiVersion, kind, namespace, name)
	if err != nil {
		return err
	}
	_, err = c.Do(http.MethodDelete, path, map[string]any{
		"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": policy,
	})
	return err
}

// MergePatch sends a JSON merge patch (RFC 7386) to the named object, or to
// one of its subresources ("status", "scale") when subresource is set, and
// returns the result.
func (c *Client) MergePatch(apiVersion, kind, namespace, name, subresource string, patch any) (Object, error) {
	path, err := c.ResourcePath(apiVersion, kind, namespace, name)
	if err != nil {
		return nil, err
	}
	if subresource != "" {
		path += "/" + subresource
	}
	body, err := json.Marshal(patch)
	if err != nil {
		return nil, fmt.Errorf("cannot encode patch: %w", err)
	}
	return c.object(http.MethodPatch, path, "application/merge-patch+json", body)
}

// Apply server-side applies obj as fieldManager, forcing conflicts (the
// test is the only writer), and returns the result.
func (c *Client) Apply(obj Object, fieldManager string) (Object, error) {
	return c.apply(obj, fieldManager, false)
}

// DryRunApply is Apply with dryRun=All: nothing is stored.
func (c *Client) DryRunApply(obj Object, fieldManager string) (Object, error) {
	return c.apply(obj, fieldManager, true)
}

// ApplyStatus server-side applies obj's status to the status subresource
// of an existing object, as a controller writing status would, and returns
// the result.
func (c *Client) ApplyStatus(obj Object, fieldManager string) (Object, error) {
	return c.applyTo(obj, "/status", fieldManager, false)
}

// DryRunUpdateStatus replaces the status of the existing object obj names
// with obj's status through the status subresource, with dryRun=All, the way
// Metacontroller writes a parent's status (a PUT of the whole object), and
// returns the result.
func (c *Client) DryRunUpdateStatus(obj Object) (Object, error) {
	apiVersion, kind, namespace, name := identity(obj)
	current, err := c.Get(apiVersion, kind, namespace, name)
	if err != nil {
		return nil, err
	}
	current["status"] = obj["status"]
	path, err := c.ResourcePath(apiVersion, kind, namespace, name)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(current)
	if err != nil {
		return nil, err
	}
	return c.object(http.MethodPut, path+"/status?dryRun=All", "application/json", body)
}

func (c *Client) apply(obj Object, fieldManager string, dryRun bool) (Object, error) {
	return c.applyTo(obj, "", fieldManager, dryRun)
}

func (c *Client) applyTo(obj Object, subresource, fieldManager string, dryRun bool) (Object, error) {
	apiVersion, kind, namespace, name := identity(obj)
	if name == "" {
		return nil, fmt.Errorf("cannot apply %s %s without metadata.name", apiVersion, kind)
	}
	path, err := c.ResourcePath(apiVersion, kind, namespace, name)
	if err != nil {
		return nil, err
	}
	path += subresource
	q := url.Values{"fieldManager": {fieldManager}, "force": {"true"}}
	if dryRun {
		q.Set("dryRun", "All")
	}
	body, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	// JSON is YAML, so it is a valid apply patch as is.
	return c.object(http.MethodPatch, path+"?"+q.Encode(), "application/apply-patch+yaml", body)
}

// ApplyYAMLFile server-side applies every document of a multi-document
// YAML file, in order, and returns the results.
func (c *Client) ApplyYAMLFile(path, fieldManager string, dryRun bool) ([]Object, error) {
	objs, err := ReadYAMLFile(path)
	if err != nil {
		return nil, err
	}
	var out []Object
	for i, obj := range objs {
		got, err := c.apply(obj, fieldManager, dryRun)
		if err != nil {
			return out, fmt.Errorf("%s: document %d: %w", path, i+1, err)
		}
		out = append(out, got)
	}
	return out, nil
}

// InstallCRDs applies the CustomResourceDefinitions in files and waits until
// each is Established and its kinds are in discovery.
func (c *Client) InstallCRDs(files ...string) error {
	var crds []Object
	for _, f := range files {
		objs, err := c.ApplyYAMLFile(f, "formspec-test", false)
		if err != nil {
			return err
		}
		crds = append(crds, objs...)
	}
	deadline := time.Now().Add(waitTimeout)
	for _, crd := range crds {
		_, kind, _, name := identity(crd)
		if kind != "CustomResourceDefinition" {
			return fmt.Errorf("InstallCRDs: %s is a %s, not a CustomResourceDefinition", name, kind)
		}
		if err := c.waitEstablished(name, deadline); err != nil {
			return err
		}
		spec, _ := crd["spec"].(map[string]any)
		group, _ := spec["group"].(string)
		names, _ := spec["names"].(map[string]any)
		crdKind, _ := names["kind"].(string)
		versions, _ := spec["versions"].([]any)
		for _, v := range versions {
			v, _ := v.(map[string]any)
			if served, _ := v["served"].(bool); !served {
				continue
			}
			version, _ := v["name"].(string)
			if err := c.waitDiscovered(group+"/"+version, crdKind, deadline); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *Client) waitEstablished(name string, deadline time.Time) error {
	for {
		crd, err := c.Get("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", name)
		if err != nil {
			return err
		}
		status, _ := crd["status"].(map[string]any)
		conds, _ := status["conditions"].([]any)
		for _, cond := range conds {
			cond, _ := cond.(map[string]any)
			switch {
			case cond["type"] == "Established" && cond["status"] == "True":
				return nil
			case cond["type"] == "NamesAccepted" && cond["status"] == "False":
				return fmt.Errorf("CustomResourceDefinition %s: names not accepted: %v", name, cond["message"])
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("CustomResourceDefinition %s not Established after %v: %v", name, waitTimeout, conds)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *Client) waitDiscovered(apiVersion, kind string, deadline time.Time) error {
	for {
		_, err := c.ResourcePath(apiVersion, kind, "x", "")
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ResourcePath returns the URL path of a collection (name empty) or an
// object of the given kind. A namespaced kind with an empty namespace is
// put in "default", as kubectl does; the namespace of a cluster-scoped kind
// is ignored.
func (c *Client) ResourcePath(apiVersion, kind, namespace, name string) (string, error) {
	r, err := c.resource(apiVersion, kind)
	if err != nil {
		return "", err
	}
	path := r.groupVersionPath
	if r.namespaced {
		if namespace == "" {
			namespace = "default"
		}
		path += "/namespaces/" + url.PathEscape(namespace)
	}
	path += "/" + r.name
	if name != "" {
		path += "/" + url.PathEscape(name)
	}
	return path, nil
}

func (c *Client) resource(apiVersion, kind string) (resource, error) {
	key := apiVersion + "/" + kind
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.kinds[key]; ok {
		return r, nil
	}
	lists, err := c.discover()
	if err != nil {
		return resource{}, err
	}
	c.kinds = map[string]resource{}
	for _, l := range lists {
		gvPath := "/apis/" + l.GroupVersion
		if !strings.Contains(l.GroupVersion, "/") {
			gvPath = "/api/" + l.GroupVersion
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") { // a subresource
				continue
			}
			c.kinds[l.GroupVersion+"/"+r.Kind] = resource{groupVersionPath: gvPath, name: r.Name, namespaced: r.Namespaced}
		}
	}
	if r, ok := c.kinds[key]; ok {
		return r, nil
	}
	return resource{}, fmt.Errorf("kind %s is not served by the API server", key)
}

// Discovery returns the resources of every served group version.
func (c *Client) Discovery() ([]metav1.APIResourceList, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.discover()
}

func (c *Client) discover() ([]metav1.APIResourceList, error) {
	var gvs []string
	var core metav1.APIVersions
	if err := c.getJSON("/api", &core); err != nil {
		return nil, err
	}
	gvs = append(gvs, core.Versions...)
	var groups metav1.APIGroupList
	if err := c.getJSON("/apis", &groups); err != nil {
		return nil, err
	}
	for _, g := range groups.Groups {
		for _, v := range g.Versions {
			gvs = append(gvs, v.GroupVersion)
		}
	}
	var lists []metav1.APIResourceList
	for _, gv := range gvs {
		path := "/apis/" + gv
		if !strings.Contains(gv, "/") {
			path = "/api/" + gv
		}
		var l metav1.APIResourceList
		if err := c.getJSON(path, &l); err != nil {
			if IsNotFound(err) { // a group version that went away meanwhile
				continue
			}
			return nil, err
		}
		l.GroupVersion = gv
		lists = append(lists, l)
	}
	return lists, nil
}

func (c *Client) getJSON(path string, v any) error {
	out, err := c.do(http.MethodGet, path, "", nil)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("cannot decode %s: %w", path, err)
	}
	return nil
}

// identity returns an object's apiVersion, kind, namespace and name.
func identity(obj Object) (apiVersion, kind, namespace, name string) {
	apiVersion, _ = obj["apiVersion"].(string)
	kind, _ = obj["kind"].(string)
	md, _ := obj["metadata"].(map[string]any)
	namespace, _ = md["namespace"].(string)
	name, _ = md["name"].(string)
	return apiVersion, kind, namespace, name
}

// ReadYAMLFile decodes every non-empty document of a multi-document YAML
// file into an Object.
func ReadYAMLFile(path string) ([]Object, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	objs, err := DecodeYAML(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return objs, nil
}

// DecodeYAML decodes every non-empty document of a multi-document YAML
// stream. Documents are separated by lines starting with "---".
func DecodeYAML(data []byte) ([]Object, error) {
	var objs []Object
	for i, doc := range splitYAML(data) {
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
			continue // only comments or whitespace
		}
		var obj Object
		if err := json.Unmarshal(js, &obj); err != nil {
			return nil, fmt.Errorf("document %d is not an object: %w", i+1, err)
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

func splitYAML(data []byte) [][]byte {
	var docs [][]byte
	var cur []byte
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		trimmed := bytes.TrimRight(line, "\r\n")
		if bytes.Equal(trimmed, []byte("---")) || bytes.HasPrefix(trimmed, []byte("--- ")) {
			docs = append(docs, cur)
			cur = nil
			continue
		}
		cur = append(cur, line...)
	}
	return append(docs, cur)
}

// Table gets path as kubectl get prints it: the server-side table with the
// resource's printer columns.
func (c *Client) Table(path string) (metav1.Table, error) {
	var table metav1.Table
	req, err := http.NewRequest(http.MethodGet, c.base+path, nil)
	if err != nil {
		return table, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := c.http.Do(req)
	if err != nil {
		return table, err
	}
	defer func() { _ = resp.Body.Close() }()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return table, fmt.Errorf("cannot read the table of %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return table, &APIError{Method: http.MethodGet, Path: path, Code: resp.StatusCode, Body: string(out)}
	}
	if err := json.Unmarshal(out, &table); err != nil {
		return table, fmt.Errorf("cannot decode the table of %s: %w", path, err)
	}
	return table, nil
}
