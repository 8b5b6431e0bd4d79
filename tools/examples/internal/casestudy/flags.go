package casestudy

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
)

// Main parses the command line with parse (exit status 2 on an error)
// and runs run until it returns or an interrupt ends its context (exit
// status 1 on an error).
func Main[O any](parse func(args []string) (O, error), run func(ctx context.Context, o O, out io.Writer) error) {
	o, err := parse(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// Ints parses a comma-separated list of positive integers given to flag
// name.
func Ints(name, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-%s %q: give positive integers, comma-separated", name, f)
		}
		out = append(out, n)
	}
	return out, nil
}

// Floats parses a comma-separated list of positive numbers given to flag
// name.
func Floats(name, s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("-%s %q: give positive numbers, comma-separated", name, f)
		}
		out = append(out, v)
	}
	return out, nil
}

// Choices parses a comma-separated list of the allowed words given to
// flag name.
func Choices(name, s string, allowed ...string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(allowed, f) {
			return nil, fmt.Errorf("-%s %q: give %s, comma-separated", name, f, strings.Join(allowed, ", "))
		}
		out = append(out, f)
	}
	return out, nil
}
