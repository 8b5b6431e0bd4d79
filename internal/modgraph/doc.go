// Package modgraph holds a test of what an application gets in its module
// graph when it imports the library: this module's go.mod must not require
// the tools' dependencies (plotting, Kubernetes, OCI images, staticcheck,
// benchstat), which live in the separate module under tools/.
package modgraph
