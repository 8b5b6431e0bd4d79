// Package image builds vnic's OCI container image without a container
// daemon or network access: an empty base, one layer with the static
// binaries and a minimal /etc (a non-root user and the vnic group), and a
// config with the entrypoint, the default user and OCI labels.
//
// [WriteArchive] writes the image as one tarball that is at once an OCI
// image layout (oci-layout, index.json, blobs/sha256/...) and a
// docker-archive (manifest.json naming the same blobs), the format
// `docker save` writes since Docker 25; so `docker load`, `podman load` and
// `skopeo copy oci-archive:...` / `docker-archive:...` all accept it.
//
// The build is reproducible: every timestamp is the one given in
// [Options.Created] (make image uses the commit time from the binaries'
// build info), files are written in a fixed order with uid and gid 0.
//
// It is used by `make image` (through tools/internal/image/mkimage) and by its
// own test, which reads the tarball back both ways and runs the binaries
// it extracts.
package image
