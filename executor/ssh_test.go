package executor

import (
	"strings"
	"testing"
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
