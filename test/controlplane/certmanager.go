package controlplane

import "testing"

// CertManagerCRDs writes stand-ins for cert-manager's Issuer and Certificate
// CRDs to a temporary file and returns its path. cert-manager's own CRDs are
// not vendored here and the tests have no network, so the stand-ins carry
// only what this repository's objects rely on: the kinds and scope, and the
// types and required fields of the Certificate fields it sets (secretName,
// issuerRef, dnsNames, usages, isCA, duration, privateKey). Anything else
// in a spec is accepted unchecked.
func CertManagerCRDs(t testing.TB) string {
	t.Helper()
	return tempFile(t, "cert-manager-crds.yaml", certManagerCRDs)
}

const certManagerCRDs = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: issuers.cert-manager.io
spec:
  group: cert-manager.io
  scope: Namespaced
  names: {kind: Issuer, plural: issuers, singular: issuer}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        required: [spec]
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: certificates.cert-manager.io
spec:
  group: cert-manager.io
  scope: Namespaced
  names: {kind: Certificate, plural: certificates, singular: certificate}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        required: [spec]
        properties:
          spec:
            type: object
            required: [issuerRef, secretName]
            x-kubernetes-preserve-unknown-fields: true
            properties:
              secretName: {type: string}
              commonName: {type: string}
              isCA: {type: boolean}
              duration: {type: string}
              dnsNames: {type: array, items: {type: string}}
              usages: {type: array, items: {type: string, enum: [signing, digital signature, content commitment, key encipherment, key agreement, data encipherment, cert sign, crl sign, encipher only, decipher only, any, server auth, client auth, code signing, email protection, s/mime, ipsec end system, ipsec tunnel, ipsec user, timestamping, ocsp signing, microsoft sgc, netscape sgc]}}
              privateKey:
                type: object
                properties:
                  algorithm: {type: string, enum: [RSA, ECDSA, Ed25519]}
                  size: {type: integer}
                  rotationPolicy: {type: string, enum: [Never, Always]}
              issuerRef:
                type: object
                required: [name]
                properties:
                  name: {type: string}
                  kind: {type: string}
                  group: {type: string}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
`
