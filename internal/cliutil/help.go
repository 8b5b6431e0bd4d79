package cliutil

import (
	"bytes"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/urfave/cli/v2"
)

// HelpWidth is the width --help output is wrapped to.
const HelpWidth = 80

// wrapHelp makes cli's help printer wrap at HelpWidth: urfave/cli aligns a
// flag's usage after the longest flag name and never wraps it, so vnicd
// run --help had lines of 300 characters and more.
func wrapHelp() {
	if wrapped {
		return
	}
	wrapped = true
	print := cli.HelpPrinter
	cli.HelpPrinter = func(w io.Writer, templ string, data interface{}) {
		var b bytes.Buffer
		print(&b, templ, data)
		io.WriteString(w, WrapHelp(b.String(), HelpWidth))
	}
}

var wrapped bool

// WrapHelp wraps every line of help text longer than width at spaces. A
// flag's or a command's line ("   --name value   usage", "   name, n
// usage": an indented name, two or more spaces, its usage) continues under
// its usage, any other line under its own first character.
func WrapHelp(text string, width int) string {
	var out strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		body := strings.TrimSuffix(line, "\n")
		if utf8.RuneCountInString(body) <= width {
			out.WriteString(line)
			continue
		}
		lead := len(body) - len(strings.TrimLeft(body, " "))
		head, pad := body[:lead], lead
		if lead > 0 {
			// A flag or a command: its usage starts after the first run
			// of two spaces.
			if i := strings.Index(body[lead:], "  "); i > 0 {
				j := lead + i
				for j < len(body) && body[j] == ' ' {
					j++
				}
				head, pad = body[:j], j
				if pad > width/2 {
					pad = lead + 6
				}
			}
		}
		col := utf8.RuneCountInString(head)
		out.WriteString(head)
		first := true
		for _, word := range strings.Fields(body[len(head):]) {
			n := utf8.RuneCountInString(word)
			switch {
			case first:
				out.WriteString(word)
				col += n
				first = false
			case col+1+n > width:
				out.WriteString("\n" + strings.Repeat(" ", pad) + word)
				col = pad + n
			default:
				out.WriteString(" " + word)
				col += 1 + n
			}
		}
		if strings.HasSuffix(line, "\n") {
			out.WriteString("\n")
		}
	}
	return out.String()
}
