package toolcall

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/portcullis-dev/portcullis/config"
	"github.com/portcullis-dev/portcullis/contract"
)

var deploy = config.Tool{
	Name: "deploy", Channel: "http", Target: "https://deploy.example/releases", Method: "POST", CredentialRef: "env:TOKEN",
	InputSchema: []byte(`{"type":"object","properties":{"release_id":{"type":"string"}},"required":["release_id"]}`),
}

// The same call through either door binds to the same action: /mcp sends
// only the tool and the arguments, Connect may spell the defined values out.
func TestBindSameActionThroughBothDoors(t *testing.T) {
	b, err := New(map[string]config.Tool{"deploy": deploy})
	if err != nil {
		t.Fatal(err)
	}
	viaMCP, err := b.Bind(Request{Actor: "agent-7", Tool: "deploy", Arguments: []byte(`{"release_id":"r1"}`)})
	if err != nil {
		t.Fatal(err)
	}
	viaConnect, err := Bind(deploy, Request{Actor: "agent-7", Tool: "deploy", Channel: "http", Target: "https://deploy.example/releases",
		Method: "POST", CredentialRef: "env:TOKEN", Arguments: []byte(`{"release_id":"r1"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(viaMCP, viaConnect) {
		t.Fatalf("different actions:\n%+v\n%+v", viaMCP, viaConnect)
	}
	if viaMCP.IntentScope != "" || viaMCP.Target != deploy.Target {
		t.Fatalf("bound action: %+v", viaMCP)
	}
}

func TestBindRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  Request
		want string
	}{
		{"target differs", Request{Tool: "deploy", Target: "https://evil.example", Arguments: []byte(`{"release_id":"r1"}`)}, "action.target"},
		{"method differs", Request{Tool: "deploy", Method: "GET", Arguments: []byte(`{"release_id":"r1"}`)}, "action.method"},
		{"schema", Request{Tool: "deploy", Arguments: []byte(`{}`)}, "input schema"},
		{"not JSON", Request{Tool: "deploy", Arguments: []byte(`{`)}, "not JSON"},
	} {
		_, err := Bind(deploy, tc.req)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalid naming %q", tc.name, err, tc.want)
		}
	}
}

// A tool without definitions keeps what the caller sent; a nil Binder and
// an unknown tool pass through.
func TestBindPassesThrough(t *testing.T) {
	bare := config.Tool{Name: "bare"}
	a, err := Bind(bare, Request{Tool: "bare", Target: "t", Method: "PUT"})
	if err != nil || a.Target != "t" || a.Method != "PUT" || string(a.Arguments) != "{}" {
		t.Fatalf("bare tool: %+v %v", a, err)
	}
	var nb *Binder
	if a, err := nb.Bind(Request{Tool: "x", Target: "t"}); err != nil || a.Target != "t" {
		t.Fatalf("nil binder: %+v %v", a, err)
	}
}

func TestScope(t *testing.T) {
	agent := contract.Contract{}
	session := contract.Contract{IntentScope: contract.ScopeSession}
	for _, tc := range []struct {
		c                  contract.Contract
		narrowing, session string
		want               string
	}{
		{agent, "", "s-1", ""},
		{agent, "run:1", "s-1", "run:1"},
		{session, "", "s-1", "session:s-1"},
		{session, "run:1", "s-1", "run:1"},
		{session, "", "", ""}, // no session (2026-07-28 clients): the agent
	} {
		if got := Scope(tc.c, tc.narrowing, tc.session); got != tc.want {
			t.Errorf("Scope(%q, %q, %q) = %q, want %q", tc.c.IntentScope, tc.narrowing, tc.session, got, tc.want)
		}
	}
}
