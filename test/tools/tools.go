//go:build tools

// Package tools pins the Kubernetes control-plane binaries that the
// integration tests run (see test/k8s-binaries.sh). It is a separate module so
// that k8s.io/kubernetes never enters the main module's dependency graph.
package tools

import (
	_ "go.etcd.io/etcd/server/v3/etcdmain"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
