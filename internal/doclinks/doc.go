// Package doclinks holds the test that keeps the repository standing
// alone: every Markdown link and every docs/*.md path named in the code,
// docs and scripts points at a file of this repository (and a heading of
// it, for a #fragment), and nothing points outside it.
package doclinks
