package controlplane

import "testing"

// PrometheusOperatorCRDs writes stand-ins for the Prometheus Operator's
// ServiceMonitor and PrometheusRule CRDs to a temporary file and returns
// its path, for the same reason as CertManagerCRDs: the operator's CRDs
// are not vendored and the tests have no network. They check what the
// chart relies on (the kinds, their scope, and the types of the fields it
// sets); the rest of a spec is accepted unchecked, and the rule file
// itself is parsed by Prometheus' own parser in test/helm.
func PrometheusOperatorCRDs(t testing.TB) string {
	t.Helper()
	return tempFile(t, "prometheus-operator-crds.yaml", prometheusOperatorCRDs)
}

const prometheusOperatorCRDs = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: servicemonitors.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: ServiceMonitor, plural: servicemonitors, singular: servicemonitor}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        required: [spec]
        properties:
          spec:
            type: object
            required: [selector]
            x-kubernetes-preserve-unknown-fields: true
            properties:
              selector:
                type: object
                properties:
                  matchLabels: {type: object, additionalProperties: {type: string}}
              endpoints:
                type: array
                items:
                  type: object
                  x-kubernetes-preserve-unknown-fields: true
                  properties:
                    port: {type: string}
                    path: {type: string}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: prometheusrules.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: PrometheusRule, plural: prometheusrules, singular: prometheusrule}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        required: [spec]
        properties:
          spec:
            type: object
            properties:
              groups:
                type: array
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    rules:
                      type: array
                      items:
                        type: object
                        required: [expr]
                        properties:
                          alert: {type: string}
                          record: {type: string}
                          expr: {x-kubernetes-int-or-string: true}
                          for: {type: string}
                          labels: {type: object, additionalProperties: {type: string}}
                          annotations: {type: object, additionalProperties: {type: string}}
`
