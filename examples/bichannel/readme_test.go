package main

import (
	"os"
	"strings"
	"testing"
)

// The README's bi-channel section shows this example byte for byte (the
// quickstart's test builds every Go block of the README).
func TestREADMEHasExample(t *testing.T) {
	md, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "```go\n"+string(self)+"```\n") {
		t.Error("no README block is examples/bichannel/main.go byte for byte: copy the file into the README's bi-channel ```go block")
	}
}
