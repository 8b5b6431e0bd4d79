// Package kubernetes holds, in its test, the offline checks of vnic's
// Kubernetes manifests in deploy/kubernetes (a kustomize base:
// `kubectl apply -k deploy/kubernetes`). They run in make test, since no
// cluster runs on the build machines, and live in the tools module because
// they decode with k8s.io/api, which the library's module must not require:
//
//   - every manifest decodes strictly (an unknown field is an error) into
//     the k8s.io/api type of its kind, and kustomization.yaml lists exactly
//     the manifests in its directory;
//   - the DaemonSet's capabilities are the systemd unit's
//     (contrib/systemd/vnicd.service is the one source of truth);
//   - the ConfigMap's vnicd.yaml, with the DaemonSet's arguments, passes
//     `vnicd run --check`, vnicd's own flag validation;
//   - the pods are Guaranteed QoS, the probes call vnicctl on the socket
//     the ConfigMap names, and the example application runs as a non-root
//     user whose supplemental group is the socket's group in the image.
//
// See docs/deploy.md for the path from a cluster to attached pods.
package kubernetes
