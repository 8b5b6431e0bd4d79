package pages

import "testing"

func TestPolicyOf(t *testing.T) {
	for in, want := range map[string]string{
		"always [madvise] never\n":                       "madvise",
		"always within_size advise [never] deny force\n": "never",
		"[always] within_size advise never deny force\n": "always",
		"garbage\n": "",
		"] [":       "",
	} {
		if got := policyOf(in); got != want {
			t.Errorf("policyOf(%q) = %q, want %q", in, got, want)
		}
	}
	for p, want := range map[string]bool{"advise": true, "within_size": true, "always": true, "force": true, "never": false, "deny": false, "": false} {
		if got := ShmemAllows(p); got != want {
			t.Errorf("ShmemAllows(%q) = %v, want %v", p, got, want)
		}
	}
}
