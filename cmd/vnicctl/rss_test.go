package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/vnic/vnic/rss"
)

// run runs vnicctl in-process with args and returns what it printed.
func run(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errw bytes.Buffer
	err = newApp(&out, &errw).Run(append([]string{"vnicctl"}, args...))
	return out.String(), errw.String(), err
}

// msTCP is the first vector of Microsoft's RSS verification suite.
var msTCP = []string{"rss", "hash", "--src", "66.9.149.187", "--dst", "161.142.100.80", "--sport", "2794", "--dport", "1766", "--proto", "tcp"}

func TestRSSHashText(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"microsoft tcp", append(msTCP, "--queues", "4"), "hash:  0x51ccc178\nindex: 120\nqueue: 0\n"},
		{"udp is the default and hashes like tcp", []string{"rss", "hash", "--src", "66.9.149.187", "--dst", "161.142.100.80", "--sport", "2794", "--dport", "1766", "--queues", "3", "--reta", "64"},
			"hash:  0x51ccc178\nindex: 56\nqueue: 2\n"},
		{"addresses only", []string{"rss", "hash", "--key", "default", "--proto", "none", "--src", "66.9.149.187", "--dst", "161.142.100.80", "--queues", "4"},
			"hash:  0x323e8fc2\nindex: 66\nqueue: 2\n"},
		{"ipv6", []string{"rss", "hash", "--proto", "tcp", "--src", "3ffe:2501:200:1fff::7", "--dst", "3ffe:2501:200:3::1", "--sport", "2794", "--dport", "1766", "--queues", "16", "--reta", "512"},
			"hash:  0x40207d3d\nindex: 317\nqueue: 13\n"},
		{"hex key", append([]string{"rss", "hash", "--key", rss.MicrosoftKey.String(), "--queues", "4"}, msTCP[2:]...), "hash:  0x51ccc178\nindex: 120\nqueue: 0\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, err := run(t, c.args...)
			if err != nil {
				t.Fatalf("%v (stderr %q)", err, errOut)
			}
			if out != c.want {
				t.Errorf("output\n%s\nwant\n%s", out, c.want)
			}
		})
	}
}

func TestRSSHashJSON(t *testing.T) {
	out, _, err := run(t, append(msTCP, "--queues", "4", "-o", "json")...)
	if err != nil {
		t.Fatal(err)
	}
	var got rssHashResult
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	want := rssHashResult{
		Key: rss.MicrosoftKey.String(), Src: "66.9.149.187", Dst: "161.142.100.80", Proto: "tcp",
		SrcPort: 2794, DstPort: 1766, Hash: "0x51ccc178", Index: 120, Queue: 0, RETASize: 128, Queues: 4,
	}
	if got != want {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

func TestRSSHashSymmetricKey(t *testing.T) {
	a, _, err := run(t, "rss", "hash", "--key", "symmetric", "--src", "198.18.0.1", "--dst", "198.18.0.2", "--sport", "1234", "--dport", "5678", "--queues", "4")
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := run(t, "rss", "hash", "--key", "symmetric", "--src", "198.18.0.2", "--dst", "198.18.0.1", "--sport", "5678", "--dport", "1234", "--queues", "4")
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Errorf("symmetric key, reversed flow:\n%s\nvs\n%s", a, b)
	}
}

func TestRSSHashRandomKeyIsPrinted(t *testing.T) {
	out, _, err := run(t, "rss", "hash", "--key", "random", "--src", "198.18.0.1", "--dst", "198.18.0.2", "--sport", "1", "--dport", "2", "--queues", "2")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "key:   ") {
		t.Fatalf("output %q", out)
	}
	// The printed key reproduces the hash.
	again, _, err := run(t, "rss", "hash", "--key", strings.TrimPrefix(lines[0], "key:   "), "--src", "198.18.0.1", "--dst", "198.18.0.2", "--sport", "1", "--dport", "2", "--queues", "2")
	if err != nil {
		t.Fatal(err)
	}
	if again != strings.Join(lines[1:], "\n")+"\n" {
		t.Errorf("printed key gives %q, want %q", again, lines[1:])
	}
}

func TestRSSHashBadInput(t *testing.T) {
	base := func(extra ...string) []string {
		return append([]string{"rss", "hash", "--src", "198.18.0.1", "--dst", "198.18.0.2", "--sport", "1", "--dport", "2", "--queues", "4"}, extra...)
	}
	for _, c := range []struct {
		args []string
		want string // a fragment of the message that says what to do
	}{
		{[]string{"rss", "hash", "--dst", "198.18.0.2", "--sport", "1", "--dport", "2", "--queues", "4"}, "give the source address with --src"},
		{[]string{"rss", "hash", "--src", "198.18.0.1", "--sport", "1", "--dport", "2", "--queues", "4"}, "give the destination address with --dst"},
		{base("--src", "198.18.0"), "--src \"198.18.0\" is not an IP address"},
		{base("--dst", "2001:db8::1"), "different address families"},
		{base("--key", "micro"), "give microsoft, symmetric, random"},
		{base("--key", "6d:5a:56"), "need at least 40"},
		{base("--proto", "sctp"), "use udp, tcp or none"},
		{base("--proto", "none"), "drop --sport and --dport"},
		{[]string{"rss", "hash", "--src", "198.18.0.1", "--dst", "198.18.0.2", "--sport", "1", "--queues", "4"}, "give --sport and --dport"},
		{base("--sport", "65536"), "give a number from 0 to 65535"},
		{base("--sport", "-1"), "vnicctl rss hash --help"},
		{base("--queues", "x"), "vnicctl rss hash --help"},
		{base("--bogus"), "vnicctl rss hash --help"},
		{[]string{"rss", "hash", "--src", "198.18.0.1", "--dst", "198.18.0.2", "--sport", "1", "--dport", "2"}, "give the number of receive queues with --queues N"},
		{base("--queues", "0"), "give 1 to 65536 queues"},
		{base("--reta", "100"), "--reta 100 is not a power of two"},
		{base("--reta", "0"), "not a power of two"},
		{base("-o", "yaml"), "use text, wide or json"},
		{base("--queues", "200"), "exceeds the 128-entry indirection table"},
		{base("--queues", "200", "--reta", "64"), "a larger --reta such as 256"},
		{base("extra"), "give everything as flags"},
	} {
		t.Run(strings.Join(c.args[2:], " "), func(t *testing.T) {
			out, _, err := run(t, c.args...)
			if err == nil {
				t.Fatalf("succeeded with output %q", out)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "rss hash: ") || !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
				t.Errorf("error %q, want one line starting with \"rss hash: \" containing %q", msg, c.want)
			}
			if out != "" {
				t.Errorf("printed %q on error", out)
			}
			if ce, ok := err.(*ctlError); !ok || ce.ExitCode() != exitUsage {
				t.Errorf("exit status of %v is not %d (usage)", err, exitUsage)
			}
		})
	}
}

// TestMainProcess runs main when asked to by TestExitStatus, in a child
// process; otherwise it does nothing.
func TestMainProcess(t *testing.T) {
	args := os.Getenv("VNICCTL_TEST_MAIN_ARGS")
	if args == "" {
		return
	}
	os.Args = append([]string{"vnicctl"}, strings.Fields(args)...)
	main()
	os.Exit(0)
}

func TestExitStatus(t *testing.T) {
	for _, c := range []struct {
		args     string
		wantCode int
		stdout   string
		stderr   string
	}{
		{strings.Join(append(msTCP, "--queues", "4"), " "), 0, "hash:  0x51ccc178\n", ""},
		{"rss hash --src nowhere --dst 198.18.0.2 --queues 4", exitUsage, "", "vnicctl: rss hash: --src \"nowhere\" is not an IP address"},
		{"bogus", exitUsage, "", "vnicctl: unknown command \"bogus\""},
		{"--socket /nonexistent/vnicd.sock status", exitNotRunning, "", "vnicctl: vnicd is not running"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMainProcess$")
		cmd.Env = append(os.Environ(), "VNICCTL_TEST_MAIN_ARGS="+c.args)
		var out, errw bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errw
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != c.wantCode {
			t.Errorf("%s: exit status %d, want %d (stderr %q)", c.args, code, c.wantCode, errw.String())
		}
		if !strings.HasPrefix(out.String(), c.stdout) {
			t.Errorf("%s: stdout %q, want prefix %q", c.args, out.String(), c.stdout)
		}
		if c.stderr != "" && (!strings.HasPrefix(errw.String(), c.stderr) || strings.Count(errw.String(), "\n") != 1) {
			t.Errorf("%s: stderr %q, want one line starting with %q", c.args, errw.String(), c.stderr)
		}
	}
}

// TestTestbedListAndQueues: testbed list groups namespaces by testbed;
// testbed up refuses --queues 0 instead of making 2.
func TestTestbedListAndQueues(t *testing.T) {
	got := listTestbeds([]string{"vnic-dut", "vnic-p0", "vnic-p1", "demo1-br", "demo1-h0", "demo1-h1", "other", "x-p0", "vt12-dut"}, "")
	if len(got) != 3 || got[0].Prefix != "demo1" || len(got[0].Namespaces) != 3 || got[1].Prefix != "vnic" || len(got[1].Namespaces) != 3 || got[2].Prefix != "vt12" {
		t.Errorf("listTestbeds: %+v", got)
	}
	if got := listTestbeds([]string{"vnic-dut", "demo1-br"}, "vnic"); len(got) != 1 || got[0].Prefix != "vnic" {
		t.Errorf("listTestbeds --prefix vnic: %+v", got)
	}
	if _, _, err := run(t, "testbed", "list", "--prefix", "vnic-nonexistent", "-o", "json"); err != nil {
		t.Errorf("testbed list: %v", err)
	}
	for _, args := range [][]string{{"testbed", "up", "--queues", "0", "--prefix", "h11none"}, {"testbed", "up", "--peers", "0", "--prefix", "h11none"}} {
		_, _, err := run(t, args...)
		if ce, ok := err.(*ctlError); !ok || ce.ExitCode() != exitUsage || !strings.Contains(err.Error(), "give 1 or more") {
			t.Errorf("%v: %v", args, err)
		}
	}
}
