package image

import (
	"archive/tar"
	"bytes"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Users and groups in the image's /etc. NonRootUID is the default user;
// VnicGID is the group that owns vnicd's socket (--socket-group vnic), which
// application pods take as a supplemental group.
const (
	NonRootUID = 65532
	VnicGID    = 2000
	// BinDir is where the binaries live in the image.
	BinDir = "/usr/local/bin"
)

// Repo and DeployTag name the image make image writes and
// deploy/kubernetes runs (its kustomization's images entry, which
// deploy/kubernetes/manifests_test.go compares with these). The archive
// also carries the version tag (Version) for docker and podman, so a
// build can be pinned: kustomize edit set image vnic=Repo:VERSION.
const (
	Repo      = "localhost/vnic/vnic"
	DeployTag = "dev"
)

// Options describe the image.
type Options struct {
	// Binaries maps a file name in BinDir to the host path of a static
	// binary (e.g. "vnicd" -> "bin/static/vnicd").
	Binaries map[string]string
	// Version is the image's version label (see [Version]).
	Version string
	// Created is the time stamped on the config, the history and every
	// file (a fixed time makes the build reproducible).
	Created time.Time
	// Arch is the GOARCH the binaries were built for ("amd64").
	Arch string
	// Entrypoint and Cmd are the config's (default: vnicd, --help).
	Entrypoint, Cmd []string
}

// etcPasswd and etcGroup are the image's accounts: root for vnicd (which
// needs capabilities, effective only for uid 0 in Kubernetes), nonroot for
// applications, and the vnic group.
var (
	etcPasswd = fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRootUID, NonRootUID)
	etcGroup  = fmt.Sprintf("root:x:0:\nvnic:x:%d:\nnonroot:x:%d:\n", VnicGID, NonRootUID)
)

// Build assembles the image in memory.
func Build(o Options) (v1.Image, error) {
	if len(o.Binaries) == 0 {
		return nil, errors.New("image: no binaries to put in the image")
	}
	if o.Arch == "" {
		return nil, errors.New("image: Arch is empty; give the GOARCH the binaries were built for")
	}
	layerTar, err := rootfs(o)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("image: layer: %w", err)
	}
	entry, cmd := o.Entrypoint, o.Cmd
	if entry == nil {
		entry, cmd = []string{path.Join(BinDir, "vnicd")}, []string{"--help"}
	}
	created := v1.Time{Time: o.Created.UTC()}
	cfg := &v1.ConfigFile{
		Architecture: o.Arch,
		OS:           "linux",
		Created:      created,
		Config: v1.Config{
			Entrypoint: entry,
			Cmd:        cmd,
			User:       fmt.Sprintf("%d:%d", NonRootUID, NonRootUID),
			Env:        []string{"PATH=" + BinDir + ":/usr/bin:/bin"},
			WorkingDir: "/",
			Labels: map[string]string{
				"org.opencontainers.image.title":       "vnic",
				"org.opencontainers.image.description": "vnicd (userspace virtual NIC with the RxBisect receive interface), vnicctl and the rxcount example",
				"org.opencontainers.image.version":     o.Version,
				"org.opencontainers.image.created":     created.Format(time.RFC3339),
				"org.opencontainers.image.licenses":    "see the repository",
			},
		},
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return nil, fmt.Errorf("image: config: %w", err)
	}
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: types.OCILayer, History: v1.History{
		Created: created, CreatedBy: "vnic make image: " + strings.Join(sortedKeys(o.Binaries), ", ") + " and /etc", Comment: "static binaries",
	}})
	if err != nil {
		return nil, fmt.Errorf("image: append the layer: %w", err)
	}
	return img, nil
}

// rootfs returns the layer as an uncompressed tar.
func rootfs(o Options) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mod := o.Created.UTC()
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, ModTime: mod, Format: tar.FormatPAX})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: mod, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, d := range []struct {
		name string
		mode int64
	}{{"etc", 0o755}, {"etc/vnicd", 0o755}, {"home", 0o755}, {"run", 0o755}, {"run/vnic", 0o750}, {"tmp", 0o1777}, {"usr", 0o755}, {"usr/local", 0o755}, {"usr/local/bin", 0o755}} {
		if err := dir(d.name, d.mode); err != nil {
			return nil, err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "home/nonroot/", Mode: 0o750, Uid: NonRootUID, Gid: NonRootUID, ModTime: mod, Format: tar.FormatPAX}); err != nil {
		return nil, err
	}
	if err := file("etc/passwd", 0o644, []byte(etcPasswd)); err != nil {
		return nil, err
	}
	if err := file("etc/group", 0o644, []byte(etcGroup)); err != nil {
		return nil, err
	}
	for _, name := range sortedKeys(o.Binaries) {
		if strings.ContainsAny(name, "/") || name == "" {
			return nil, fmt.Errorf("image: binary name %q: give a plain file name", name)
		}
		data, err := os.ReadFile(o.Binaries[name])
		if err != nil {
			return nil, fmt.Errorf("image: %w; build the static binaries first (make image does)", err)
		}
		if err := file(strings.TrimPrefix(path.Join(BinDir, name), "/"), 0o755, data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// dockerManifest is one entry of a docker-archive's manifest.json.
type dockerManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// WriteArchive writes img, named ref ("vnic/vnic:v1.2.3"), as a tarball that
// is both an OCI image layout and a docker-archive (see the package doc).
// aliases are further names the docker-archive gives it (docker load and
// podman load tag them all); the OCI layout names ref only, since an OCI
// index with two entries makes oci-archive readers ask which to take.
func WriteArchive(w io.Writer, img v1.Image, ref string, aliases ...string) error {
	named, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("image: reference %q: %w; want repository:tag", ref, err)
	}
	for _, a := range aliases {
		if _, err := name.NewTag(a, name.StrictValidation); err != nil {
			return fmt.Errorf("image: reference %q: %w; want repository:tag", a, err)
		}
	}
	tag := named.TagStr()
	manifest, err := img.RawManifest()
	if err != nil {
		return fmt.Errorf("image: manifest: %w", err)
	}
	mdig, err := img.Digest()
	if err != nil {
		return err
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return fmt.Errorf("image: config: %w", err)
	}
	cdig, err := img.ConfigName()
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	mod := cfg.Created.Time
	put := func(name string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: mod, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	blob := func(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "blobs/", Mode: 0o755, ModTime: mod, Format: tar.FormatPAX}); err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "blobs/sha256/", Mode: 0o755, ModTime: mod, Format: tar.FormatPAX}); err != nil {
		return err
	}
	dm := dockerManifest{Config: blob(cdig), RepoTags: append([]string{ref}, aliases...)}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return err
		}
		if err := put(blob(d), data); err != nil {
			return err
		}
		dm.Layers = append(dm.Layers, blob(d))
	}
	if err := put(blob(cdig), config); err != nil {
		return err
	}
	if err := put(blob(mdig), manifest); err != nil {
		return err
	}
	index := v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType: types.OCIManifestSchema1,
			Size:      int64(len(manifest)),
			Digest:    mdig,
			Annotations: map[string]string{
				"org.opencontainers.image.ref.name": tag,
				"io.containerd.image.name":          ref,
			},
		}},
	}
	ij, err := json.Marshal(index)
	if err != nil {
		return err
	}
	if err := put("index.json", ij); err != nil {
		return err
	}
	mj, err := json.Marshal([]dockerManifest{dm})
	if err != nil {
		return err
	}
	if err := put("manifest.json", mj); err != nil {
		return err
	}
	if err := put("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	return tw.Close()
}

var tagRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// Version reads a Go binary's build info and returns its version as an
// image tag, and the commit time (the image's creation time). A build from
// a module version gives that version; a build from a checkout gives the
// pseudo-version Go stamps from git (v0.0.0-TIME-COMMIT), with "+dirty"
// turned into "-dirty" (a tag cannot hold "+").
func Version(binary string) (string, time.Time, error) {
	bi, err := buildinfo.ReadFile(binary)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("image: build info of %s: %w", binary, err)
	}
	v := bi.Main.Version
	var rev, modified string
	var when time.Time
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		case "vcs.time":
			when, _ = time.Parse(time.RFC3339, s.Value)
		}
	}
	if v == "" || v == "(devel)" {
		v = "devel"
		if len(rev) >= 12 {
			v = "v0.0.0-" + rev[:12]
		}
		if modified == "true" {
			v += "-dirty"
		}
	}
	v = strings.ReplaceAll(v, "+", "-")
	if !tagRE.MatchString(v) {
		return "", time.Time{}, fmt.Errorf("image: version %q of %s is not a valid tag", v, binary)
	}
	if when.IsZero() {
		when = time.Unix(0, 0).UTC()
	}
	return v, when, nil
}
