// Package cliutil holds what vnicd and vnicctl share on the command line:
// the --version printer (from package buildinfo) and the `completion`
// command that prints a shell completion script for bash, zsh or fish
// (`make install` installs them; urfave/cli answers the completions).
package cliutil
