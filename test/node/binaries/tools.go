//go:build tools

// Package binaries pins the node binaries the one-node test cluster runs
// (kubelet, kube-proxy, kube-scheduler; see test/node-binaries.sh), at the
// same k8s.io/kubernetes version as test/tools' control plane. It is a module
// of its own so that adding them does not change test/tools' go.mod, whose
// hash decides when the control-plane binaries are rebuilt.
package binaries

import (
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
