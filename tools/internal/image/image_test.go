package image_test

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/vnic/vnic/tools/internal/image"
)

// buildStatic builds the image's binaries as make image does (static,
// CGO_ENABLED=0) into a temporary directory.
func buildStatic(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-trimpath", "-o", dir+string(os.PathSeparator), "./cmd/vnicd", "./cmd/vnicctl", "./examples/rxcount")
	cmd.Dir = filepath.Join("..", "..", "..") // the root module, where make image builds them
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

func TestImageRoundTrip(t *testing.T) {
	bin := buildStatic(t)
	bins := map[string]string{"vnicd": filepath.Join(bin, "vnicd"), "vnicctl": filepath.Join(bin, "vnicctl"), "rxcount": filepath.Join(bin, "rxcount")}
	version, created, err := image.Version(bins["vnicd"])
	if err != nil {
		t.Fatal(err)
	}
	opts := image.Options{Binaries: bins, Version: version, Created: created, Arch: runtime.GOARCH}
	img, err := image.Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	ref := image.Repo + ":" + image.DeployTag
	alias := image.Repo + ":" + version
	archive := filepath.Join(t.TempDir(), "vnic-image.tar")
	f, err := os.Create(archive)
	if err != nil {
		t.Fatal(err)
	}
	if err := image.WriteArchive(f, img, ref, alias); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	want, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}

	// Reproducible: the same inputs give the same digest.
	again, err := image.Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := again.Digest(); d != want {
		t.Errorf("two builds of the same binaries differ: %s and %s", want, d)
	}

	t.Run("oci-layout", func(t *testing.T) {
		dir := t.TempDir()
		untar(t, archive, dir)
		idx, err := layout.ImageIndexFromPath(dir)
		if err != nil {
			t.Fatal(err)
		}
		im, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(im.Manifests) != 1 {
			t.Fatalf("index.json lists %d manifests, want 1", len(im.Manifests))
		}
		m := im.Manifests[0]
		if m.Digest != want || m.MediaType != types.OCIManifestSchema1 {
			t.Errorf("index.json names %s (%s), want %s (%s)", m.Digest, m.MediaType, want, types.OCIManifestSchema1)
		}
		if got := m.Annotations["org.opencontainers.image.ref.name"]; got != image.DeployTag {
			t.Errorf("ref.name annotation %q, want %q (what deploy/kubernetes runs)", got, image.DeployTag)
		}
		got, err := idx.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkImage(t, got, version)
	})
	t.Run("docker-archive", func(t *testing.T) {
		for _, r := range []string{ref, alias} {
			tag, err := name.NewTag(r)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tarball.ImageFromPath(archive, &tag)
			if err != nil {
				t.Fatalf("manifest.json does not lead to the image %s: %v", r, err)
			}
			checkImage(t, got, version)
		}
	})
	t.Run("skopeo", func(t *testing.T) {
		if _, err := exec.LookPath("skopeo"); err != nil {
			t.Skip("skipping: skopeo is not installed (make test installs it with apt); the archive was read back by go-containerregistry only")
		}
		for _, transport := range []string{"oci-archive:", "docker-archive:"} {
			out, err := exec.Command("skopeo", "inspect", "--config", transport+archive).CombinedOutput()
			if err != nil {
				t.Fatalf("skopeo inspect %s: %v\n%s", transport, err, out)
			}
			var cfg v1.ConfigFile
			if err := json.Unmarshal(out, &cfg); err != nil {
				t.Fatalf("skopeo %s: %v", transport, err)
			}
			if cfg.Config.Entrypoint[0] != "/usr/local/bin/vnicd" || cfg.Config.Labels["org.opencontainers.image.version"] != version {
				t.Errorf("skopeo %s reads entrypoint %v, version %q", transport, cfg.Config.Entrypoint, cfg.Config.Labels["org.opencontainers.image.version"])
			}
		}
		// A copy checks every blob's digest.
		if out, err := exec.Command("skopeo", "copy", "oci-archive:"+archive, "dir:"+t.TempDir()).CombinedOutput(); err != nil {
			t.Fatalf("skopeo copy: %v\n%s", err, out)
		}
	})
}

// checkImage checks what a loader reads back: the config, the one layer,
// its files, and that the binaries are static and run.
func checkImage(t *testing.T, img v1.Image, version string) {
	t.Helper()
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s", cfg.OS, cfg.Architecture)
	}
	if got := strings.Join(cfg.Config.Entrypoint, " "); got != "/usr/local/bin/vnicd" {
		t.Errorf("entrypoint %q", got)
	}
	if cfg.Config.User != "65532:65532" {
		t.Errorf("default user %q, want the non-root 65532:65532", cfg.Config.User)
	}
	if cfg.Config.Labels["org.opencontainers.image.version"] != version {
		t.Errorf("version label %q, want %q", cfg.Config.Labels["org.opencontainers.image.version"], version)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 || len(cfg.RootFS.DiffIDs) != 1 {
		t.Fatalf("%d layers, %d diff ids; want one of each", len(layers), len(cfg.RootFS.DiffIDs))
	}
	files := map[string][]byte{}
	modes := map[string]int64{}
	tr := tar.NewReader(mutate.Extract(img))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 && strings.TrimSuffix(h.Name, "/") != "home/nonroot" {
			t.Errorf("%s is owned by uid %d", h.Name, h.Uid)
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name], modes[h.Name] = b, h.Mode
		}
	}
	if !strings.Contains(string(files["etc/group"]), "vnic:x:2000:") || !strings.Contains(string(files["etc/passwd"]), "nonroot:x:65532:65532:") {
		t.Errorf("/etc/group or /etc/passwd lack the vnic group or the nonroot user:\n%s%s", files["etc/group"], files["etc/passwd"])
	}
	dir := t.TempDir()
	for _, b := range []string{"vnicd", "vnicctl", "rxcount"} {
		data, ok := files["usr/local/bin/"+b]
		if !ok || modes["usr/local/bin/"+b] != 0o755 {
			t.Fatalf("usr/local/bin/%s missing or not 0755 (mode %o)", b, modes["usr/local/bin/"+b])
		}
		e, err := elf.NewFile(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s is not an ELF binary: %v", b, err)
		}
		for _, p := range e.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s has a dynamic loader: not static, it would not run on an empty base", b)
			}
		}
		if libs, _ := e.ImportedLibraries(); len(libs) > 0 {
			t.Errorf("%s needs shared libraries %v", b, libs)
		}
		if err := os.WriteFile(filepath.Join(dir, b), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The extracted binaries run: both tools print their version, vnicd
	// validates its default flags, rxcount prints its usage.
	for _, args := range [][]string{{"vnicd", "--version"}, {"vnicctl", "--version"}, {"vnicd", "run", "--check"}, {"rxcount", "-h"}} {
		cmd := exec.Command(filepath.Join(dir, args[0]), args[1:]...)
		cmd.Env = []string{"PATH=/nonexistent"}
		done := make(chan struct{})
		var out []byte
		go func() { out, err = cmd.CombinedOutput(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Fatalf("%v hung", args)
		}
		if err != nil {
			t.Errorf("%v from the image: %v\n%s", args, err, out)
		}
		if args[1] == "--version" && !strings.HasPrefix(string(out), args[0]+" ") {
			t.Errorf("%v printed %q", args, out)
		}
	}
}

func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, dir) {
			t.Fatalf("archive entry %q escapes the directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, b, 0o644)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestWriteArchiveRefusesBadReference(t *testing.T) {
	img, err := image.Build(image.Options{Binaries: map[string]string{"x": "/proc/self/exe"}, Arch: runtime.GOARCH, Version: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"vnic:bad+tag", "UPPER/case:v1", ""} {
		if err := image.WriteArchive(io.Discard, img, ref); err == nil {
			t.Errorf("reference %q accepted", ref)
		}
	}
}
