package executor

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestParseMarker(t *testing.T) {
	for _, tc := range []struct {
		out  string
		m    Marker
		code int
		body string
		bad  bool
	}{
		{out: "absent\n", m: MarkerAbsent},
		{out: "running\n", m: MarkerRunning},
		{out: "done 0\nhello\nworld\n", m: MarkerDone, body: "hello\nworld\n"},
		{out: "done 3\n", m: MarkerDone, code: 3},
		{out: "done 255", m: MarkerDone, code: 255},
		{out: "done -1\n", bad: true},
		{out: "done 256\n", bad: true},
		{out: "done x\n", bad: true},
		{out: "done \n", bad: true},
		{out: "", bad: true},
		{out: "Absent\n", bad: true},
		{out: "motd banner\nabsent\n", bad: true},
	} {
		m, code, body, err := parseMarker([]byte(tc.out))
		if tc.bad {
			if err == nil {
				t.Errorf("%q: accepted as %v %d %q", tc.out, m, code, body)
			}
			continue
		}
		if err != nil || m != tc.m || code != tc.code || body != tc.body {
			t.Errorf("%q: %v %d %q %v", tc.out, m, code, body, err)
		}
	}
	// Output read back is capped like any result (3 MB of it could never
	// be recorded: an event holds at most 1 MiB).
	if _, _, body, err := parseMarker([]byte("done 0\n" + strings.Repeat("x", 3<<20))); err != nil || len(body) != MaxResultBytes {
		t.Errorf("a long output read back: %d bytes, %v; want %d", len(body), err, MaxResultBytes)
	}
}

func TestValidID(t *testing.T) {
	for id, want := range map[string]bool{
		testID:                            true,
		"act_01M8MFY3Q2ABCDEFGHJKMNPQR":   false, // short
		"act_01M8MFY3Q2ABCDEFGHJKMNPQR;":  false,
		"act_01m8mfy3q2abcdefghjkmnpqrs":  false,
		"xct_01M8MFY3Q2ABCDEFGHJKMNPQRS":  false,
		"act_01M8MFY3Q2ABCDEF$(reboot)RS": false,
	} {
		if validID(id) != want {
			t.Errorf("validID(%q) = %v", id, !want)
		}
	}
}

// FuzzParseMarker: the marker query's output comes from the remote host.
// Whatever it says, the parse never panics, a done marker has a shell exit
// status, and only the exact words settle anything.
func FuzzParseMarker(f *testing.F) {
	for _, s := range []string{"absent\n", "running\n", "done 0\nok\n", "done 222\n", "done 9999999999999999999\n", "done +1\n", "\x00"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, code, body, err := parseMarker(b)
		if err != nil {
			return
		}
		head, _, _ := strings.Cut(string(b), "\n")
		switch m {
		case MarkerAbsent, MarkerRunning:
			if head != "absent" && head != "running" {
				t.Fatalf("%q settled as %v", b, m)
			}
		case MarkerDone:
			if !strings.HasPrefix(head, "done ") || code < 0 || code > maxExitStatus {
				t.Fatalf("%q: done %d", b, code)
			}
			if utf8.ValidString(string(b)) && !strings.HasSuffix(string(b), body) {
				t.Fatalf("%q: body %q is not the output", b, body)
			}
		default:
			t.Fatalf("%q: marker %v without error", b, m)
		}
	})
}

// The remote wrapper, run by a local shell: a request that arrives after
// its start-by time is refused before anything is created or run (exit
// 223, no marker), so a status query's "absent" after the dispatch
// deadline stays true; in time it runs once, and a second start of the
// same execution is refused (222).
func TestWrapperRefusesLateStart(t *testing.T) {
	home := t.TempDir()
	ran := filepath.Join(home, "ran")
	const id = "act_01M92FZBA2XPH4NFQB6HTY1SQZ"
	run := func(startBy time.Time) int {
		t.Helper()
		cmd := exec.Command("sh", "-c", wrapper(id, "echo run >> "+ran+"; exit 5", startBy))
		cmd.Env = append(os.Environ(), "HOME="+home)
		cmd.Stdin = strings.NewReader(`{}`)
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	}
	if code := run(time.Now().Add(-time.Minute)); code != tooLate {
		t.Fatalf("late start: exit %d, want %d", code, tooLate)
	}
	if _, err := os.Stat(filepath.Join(home, ".portcullis", "runs", id)); !os.IsNotExist(err) {
		t.Fatalf("a late start left a marker: %v", err)
	}
	if _, err := os.Stat(ran); !os.IsNotExist(err) {
		t.Fatal("a late start ran the command")
	}
	if code := run(time.Now().Add(time.Minute)); code != 5 {
		t.Fatalf("start in time: exit %d, want the command's 5", code)
	}
	if code := run(time.Now().Add(time.Minute)); code != alreadyStarted {
		t.Fatalf("second start: exit %d, want %d", code, alreadyStarted)
	}
	if b, _ := os.ReadFile(ran); string(b) != "run\n" {
		t.Fatalf("the command ran %q, want once", b)
	}
}
