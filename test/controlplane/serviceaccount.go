package controlplane

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// ServiceAccountToken asks the API server for a token of the service
// account namespace/name (the TokenRequest API, as the kubelet does for a
// pod), so that a program the test runs is authorized as that account's
// RBAC allows and no more.
func (c *Client) ServiceAccountToken(namespace, name string) (string, error) {
	raw, err := c.Do(http.MethodPost, "/api/v1/namespaces/"+namespace+"/serviceaccounts/"+name+"/token",
		map[string]any{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": map[string]any{}})
	if err != nil {
		return "", fmt.Errorf("cannot get a token for %s/%s: %w", namespace, name, err)
	}
	var tr struct {
		Status struct {
			Token string `json:"token"`
		} `json:"status"`
	}
	if err := json.Unmarshal(raw, &tr); err != nil {
		return "", fmt.Errorf("cannot decode the TokenRequest for %s/%s: %w", namespace, name, err)
	}
	if tr.Status.Token == "" {
		return "", fmt.Errorf("the TokenRequest for %s/%s holds no token", namespace, name)
	}
	return tr.Status.Token, nil
}

// WriteKubeconfig writes a kubeconfig for this control plane that
// authenticates with token, for a program the test runs as someone other
// than the admin.
func (cp *ControlPlane) WriteKubeconfig(path, token string) error {
	return writeKubeconfig(path, cp.URL, token, cp.CACert)
}
