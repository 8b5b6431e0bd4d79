package main

import "testing"

// TestDisplayName: a name that could steer a terminal or forge a table row
// is shown quoted and escaped; an ordinary one as it is.
func TestDisplayName(t *testing.T) {
	for in, want := range map[string]string{
		"kv-1.a@b":    "kv-1.a@b",
		"evil\x1b[2J": `"evil\x1b[2J"`,
		"two\nrows":   `"two\nrows"`,
		"a b":         `"a b"`,
		"caf\u00e9":   `"caf\u00e9"`,
	} {
		if got := displayName(in); got != want {
			t.Errorf("displayName(%q) = %s, want %s", in, got, want)
		}
	}
}
