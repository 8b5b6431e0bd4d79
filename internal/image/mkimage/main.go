// Command mkimage writes vnic's OCI image tarball (make image). It runs
// offline: no container daemon, no registry.
//
//	go run ./internal/image/mkimage -bin bin/static -o bin/vnic-image.tar
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/vnic/vnic/internal/image"
)

func main() {
	bin := flag.String("bin", "bin/static", "directory with the static vnicd, vnicctl and rxcount")
	out := flag.String("o", "bin/vnic-image.tar", "output tarball")
	repo := flag.String("repo", "localhost/vnic/vnic", "image repository name")
	arch := flag.String("arch", runtime.GOARCH, "GOARCH the binaries were built for")
	flag.Parse()
	if err := run(*bin, *out, *repo, *arch); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func run(bin, out, repo, arch string) error {
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
	ref := repo + ":" + version
	if err := image.WriteArchive(w, img, ref); err != nil {
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
	fmt.Printf("wrote %s: %s (%s)\n  load it with: docker load -i %s   or   podman load -i %s\n", out, ref, d, out, out)
	return nil
}
