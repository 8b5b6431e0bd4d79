package doclinks

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// repoFiles returns the repository's tracked text files (relative paths)
// and the repository's root.
func repoFiles(t *testing.T) (root string, files []string) {
	t.Helper()
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	root = strings.TrimSpace(string(out))
	out, err = exec.Command("git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		switch filepath.Ext(f) {
		case ".go", ".md", ".sh", ".py", ".yaml", ".yml", ".service", ".txt", ".conf", "":
			if _, err := os.Stat(filepath.Join(root, f)); err == nil {
				files = append(files, f)
			}
		}
	}
	return root, files
}

// slug is GitHub's anchor for a heading.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// anchors returns the heading anchors of a Markdown file.
func anchors(md string) map[string]bool {
	a := map[string]bool{}
	in := false
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			in = !in
		}
		if !in && strings.HasPrefix(l, "#") {
			a[slug(strings.TrimLeft(l, "#"))] = true
		}
	}
	return a
}

var (
	mdLink  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	docPath = regexp.MustCompile(`\bdocs/[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md\b`)
	// What a link out of the repository looked like: the sibling folder
	// the design and its sources were once kept in.
	outside = []string{"../" + "shared", "DESIGN" + ".md", "seeds" + "/"}
)

// TestNoLinkLeavesTheRepository: relative links in Markdown resolve to
// files inside the repository (and #fragments to headings), docs/*.md paths
// named anywhere exist, and no file names the folder the design once lived
// in.
func TestNoLinkLeavesTheRepository(t *testing.T) {
	root, files := repoFiles(t)
	if _, err := os.Stat(filepath.Join(root, "docs", "design.md")); err != nil {
		t.Errorf("docs/design.md, the design document, is missing: %v", err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		text := string(raw)
		if !strings.HasSuffix(f, "doclinks_test.go") {
			for _, o := range outside {
				if i := strings.Index(text, o); i >= 0 {
					t.Errorf("%s:%d names %q, which is not in the repository; point at docs/design.md instead", f, strings.Count(text[:i], "\n")+1, o)
				}
			}
		}
		for _, m := range docPath.FindAllStringIndex(text, -1) {
			p := text[m[0]:m[1]]
			if _, err := os.Stat(filepath.Join(root, p)); err != nil {
				t.Errorf("%s:%d names %s, which does not exist", f, strings.Count(text[:m[0]], "\n")+1, p)
			}
		}
		if filepath.Ext(f) != ".md" {
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatchIndex(text, -1) {
			target := text[m[2]:m[3]]
			line := strings.Count(text[:m[0]], "\n") + 1
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			dest := filepath.Join(root, f) // a bare #fragment: this file
			if path != "" {
				dest = filepath.Join(filepath.Dir(filepath.Join(root, f)), path)
			}
			if rel, err := filepath.Rel(root, dest); err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("%s:%d links %s, outside the repository", f, line, target)
				continue
			}
			st, err := os.Stat(dest)
			if err != nil {
				t.Errorf("%s:%d links %s, which does not exist", f, line, target)
				continue
			}
			if frag != "" && !st.IsDir() && strings.HasSuffix(dest, ".md") {
				md, _ := os.ReadFile(dest)
				if !anchors(string(md))[frag] {
					t.Errorf("%s:%d links %s, but %s has no heading with the anchor #%s", f, line, target, path, frag)
				}
			}
		}
	}
}

// TestSlug: anchors as GitHub makes them.
func TestSlug(t *testing.T) {
	for h, want := range map[string]string{
		" 2. The RxBisect interface":                   "2-the-rxbisect-interface",
		" Sizing, and why the rings must be small":     "sizing-and-why-the-rings-must-be-small",
		" Capturing a tenant's frames: `vnicctl dump`": "capturing-a-tenants-frames-vnicctl-dump",
	} {
		if got := slug(h); got != want {
			t.Errorf("slug(%q) = %q, want %q", h, got, want)
		}
	}
}
