// Command mkimage writes vnic's OCI image tarball (make image). It runs
// offline: no container daemon, no registry.
//
//	go -C tools build -o ../bin/ ./internal/image/mkimage   # from the repository root
//	bin/mkimage -bin bin/static -o bin/vnic-image.tar
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/vnic/vnic/tools/internal/image"
)

func main() {
	bin := flag.String("bin", "bin/static", "directory with the static vnicd, vnicctl and rxcount")
	out := flag.String("o", "bin/vnic-image.tar", "output tarball")
	repo := flag.String("repo", image.Repo, "image repository name")
	tag := flag.String("tag", image.DeployTag, "the tag deploy/kubernetes runs; the archive also carries the version tag")
	arch := flag.String("arch", runtime.GOARCH, "GOARCH the binaries were built for")
	flag.Parse()
	if err := run(*bin, *out, *repo, *tag, *arch); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func run(bin, out, repo, tag, arch string) error {
	bins := map[string]string{}
	for _, n := range []string{"vnicd", "vnicctl", "rxcount"} {
		bins[n] = filepath.Join(bin, n)
	}
	version, created, err := image.Version(bins["vnicd"])
	if err != nil {
		return err
	}
	img, err := image.Build(image.Options{Binaries: bins, Version: version, Created: created, Arch: arch})
	if err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	ref := repo + ":" + tag
	var aliases []string
	if version != tag {
		aliases = append(aliases, repo+":"+version)
	}
	if err := image.WriteArchive(w, img, ref, aliases...); err != nil {
		f.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	d, _ := img.Digest()
	fmt.Printf("wrote %s: %s %v (%s)\n  load it with: docker load -i %s   or   podman load -i %s\n", out, ref, aliases, d, out, out)
	return nil
}
