// Package deploy holds the Kubernetes manifests for running mlxcel replicas
// behind a load balancer (base/, a kustomize base; docs/deploy.md) and the
// test that decodes them strictly into the Kubernetes API types and checks
// that they refer to each other and to mlxcel's real flags, endpoints and
// metrics.
package deploy
