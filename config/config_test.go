package config

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/portcullis-dev/portcullis/contract"
)

// TestParseGood checks what valid configs decode to.
func TestParseGood(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		tool string
		want Tool
	}{{
		name: "design example",
		yaml: `
tools:
  deploy_release:
    retry: status_query
    match_window: 1h
    fingerprint:
      defaults: {region: us-east-1}
      ignore: [comment]
      secrets: [token]
    approval: session
`,
		tool: "deploy_release",
		want: Tool{Name: "deploy_release", Contract: contract.Contract{
			Tool: "deploy_release", Retry: contract.StatusQuery,
			MatchWindow: contract.MatchWindow{Duration: time.Hour},
			Fingerprint: contract.FingerprintRules{
				Defaults: map[string]any{"region": "us-east-1"},
				Ignore:   []string{"comment"},
				Secrets:  []string{"token"},
			},
			Approval: contract.ApprovalSession,
		}},
	}, {
		name: "approval defaults to session",
		yaml: "tools:\n  pay: {retry: idempotency_key, match_window: 10m}\n",
		tool: "pay",
		want: Tool{Name: "pay", Contract: contract.Contract{
			Tool: "pay", Retry: contract.IdempotencyKey,
			MatchWindow: contract.MatchWindow{Duration: 10 * time.Minute},
			Approval:    contract.ApprovalSession,
		}},
	}, {
		name: "key_retention, intent_scope and timeout reach the contract",
		yaml: "tools:\n  pay: {retry: idempotency_key, match_window: 10m, key_retention: 48h, intent_scope: session, timeout: 2s}\n",
		tool: "pay",
		want: Tool{Name: "pay", Timeout: 2 * time.Second, Contract: contract.Contract{
			Tool: "pay", Retry: contract.IdempotencyKey,
			MatchWindow:  contract.MatchWindow{Duration: 10 * time.Minute},
			KeyRetention: contract.KeyRetention{Duration: 48 * time.Hour},
			IntentScope:  contract.ScopeSession, Timeout: 2 * time.Second,
			Approval: contract.ApprovalSession,
		}},
	}, {
		name: "key_retention ledger is the default, written out",
		yaml: "tools:\n  pay: {retry: idempotency_key, match_window: 10m, key_retention: ledger, intent_scope: agent}\n",
		tool: "pay",
		want: Tool{Name: "pay", Contract: contract.Contract{
			Tool: "pay", Retry: contract.IdempotencyKey,
			MatchWindow: contract.MatchWindow{Duration: 10 * time.Minute},
			IntentScope: contract.ScopeAgent, Approval: contract.ApprovalSession,
		}},
	}, {
		name: "until_resolved and per_use",
		yaml: "tools:\n  rotate:\n    retry: irreversible\n    match_window: until_resolved\n    approval: per_use\n",
		tool: "rotate",
		want: Tool{Name: "rotate", Contract: contract.Contract{
			Tool: "rotate", Retry: contract.Irreversible,
			MatchWindow: contract.MatchWindow{UntilResolved: true},
			Approval:    contract.ApprovalPerUse,
		}},
	}, {
		name: "read_only needs no match_window",
		yaml: "tools:\n  get: {retry: read_only}\n",
		tool: "get",
		want: Tool{Name: "get", Contract: contract.Contract{Tool: "get", Retry: contract.ReadOnly, Approval: contract.ApprovalSession}},
	}, {
		name: "read_only match_window is allowed and ignored",
		yaml: "tools:\n  get: {retry: read_only, match_window: 5m}\n",
		tool: "get",
		want: Tool{Name: "get", Contract: contract.Contract{Tool: "get", Retry: contract.ReadOnly, Approval: contract.ApprovalSession}},
	}, {
		name: "longest match_window",
		yaml: "tools:\n  a: {retry: status_query, match_window: 720h}\n",
		tool: "a",
		want: Tool{Name: "a", Contract: contract.Contract{
			Tool: "a", Retry: contract.StatusQuery,
			MatchWindow: contract.MatchWindow{Duration: 720 * time.Hour},
			Approval:    contract.ApprovalSession,
		}},
	}, {
		name: "tool definition keys",
		yaml: `
tools:
  ops.restart-svc_2:
    description: Restart a service
    channel: ssh
    target: ops@host:22
    credential_ref: vault:ssh/ops
    method: systemctl restart
    input_schema:
      type: object
      required: [service]
    retry: irreversible
    match_window: until_resolved
`,
		tool: "ops.restart-svc_2",
		want: Tool{
			Name: "ops.restart-svc_2", Description: "Restart a service", Channel: "ssh",
			Target: "ops@host:22", CredentialRef: "vault:ssh/ops", Method: "systemctl restart",
			InputSchema: []byte(`{"required":["service"],"type":"object"}`),
			Contract: contract.Contract{
				Tool: "ops.restart-svc_2", Retry: contract.Irreversible,
				MatchWindow: contract.MatchWindow{UntilResolved: true},
				Approval:    contract.ApprovalSession,
			},
		},
	}, {
		name: "nested defaults take JSON types",
		yaml: "tools:\n  a:\n    retry: status_query\n    match_window: 1m\n    fingerprint:\n      defaults:\n        spec.replicas: 3\n        spec: {paused: false, tags: [a, 1.5]}\n",
		tool: "a",
		want: Tool{Name: "a", Contract: contract.Contract{
			Tool: "a", Retry: contract.StatusQuery,
			MatchWindow: contract.MatchWindow{Duration: time.Minute},
			Fingerprint: contract.FingerprintRules{Defaults: map[string]any{
				"spec.replicas": float64(3),
				"spec":          map[string]any{"paused": false, "tags": []any{"a", 1.5}},
			}},
			Approval: contract.ApprovalSession,
		}},
	}, {
		name: "anchors and aliases",
		yaml: `
tools:
  a:
    retry: status_query
    match_window: 1h
    fingerprint: &fp
      ignore: [comment]
  b:
    retry: status_query
    match_window: 1h
    fingerprint: *fp
`,
		tool: "b",
		want: Tool{Name: "b", Contract: contract.Contract{
			Tool: "b", Retry: contract.StatusQuery,
			MatchWindow: contract.MatchWindow{Duration: time.Hour},
			Fingerprint: contract.FingerprintRules{Ignore: []string{"comment"}},
			Approval:    contract.ApprovalSession,
		}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse("good.yaml", []byte(tt.yaml))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			got, ok := cfg.Tools[tt.tool]
			if !ok {
				t.Fatalf("tool %q missing; have %v", tt.tool, cfg.Tools)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("tool %q:\n got %#v\nwant %#v", tt.tool, got, tt.want)
			}
			c, ok := cfg.Contracts().Lookup(tt.tool)
			if !ok || !reflect.DeepEqual(c, tt.want.Contract) {
				t.Errorf("Contracts()[%q] = %#v, %v; want %#v", tt.tool, c, ok, tt.want.Contract)
			}
		})
	}
}

func TestParseGateway(t *testing.T) {
	cfg, err := Parse("gw.yaml", []byte("gateway:\n  id: gw-eu_1\ntools: {}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.GatewayID != "gw-eu_1" || cfg.Path != "gw.yaml" || cfg.Tools == nil || len(cfg.Tools) != 0 {
		t.Errorf("got %+v", cfg)
	}
	cfg, err = Parse("gw.yaml", []byte("tools:\n  a: {retry: read_only}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.GatewayID != "" {
		t.Errorf("GatewayID = %q, want empty", cfg.GatewayID)
	}
}

// TestParseBad checks that each rule refuses a bad config with the file, the
// line, the key path and the reason.
func TestParseBad(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string // "bad.yaml:LINE: KEY: REASON..." must be in the error
	}{
		{"empty file", "", `bad.yaml: file is empty`},
		{"only comments", "# nothing\n", `bad.yaml: file is empty`},
		{"syntax", "tools:\n  a: b: c\n", `bad.yaml:2: YAML syntax: mapping value is not allowed`},
		{"duplicate key", "tools:\n  a: {retry: read_only}\n  a: {retry: read_only}\n", `bad.yaml:3: YAML syntax: mapping key "a" already defined`},
		{"two documents", "tools: {}\n---\ntools: {}\n", `bad.yaml:3: more than one YAML document`},
		{"top level not a mapping", "- tools\n", `bad.yaml:1: want a mapping, got a list`},
		{"unknown top-level key", "tools: {}\ntool: {}\n", `bad.yaml:2: tool: unknown key "tool" (want tools, gateway, agents, callers, vault, upstreams)`},
		{"tools not a mapping", "tools: [a]\n", `bad.yaml:1: tools: want a mapping, got a list`},
		{"tool not a mapping", "tools:\n  a: status_query\n", `bad.yaml:2: tools.a: want a mapping, got a string`},
		{"tool name with space", "tools:\n  'deploy release': {retry: read_only}\n", `bad.yaml:2: tools: invalid tool name "deploy release" (want 1-64 characters`},
		{"tool name too long", "tools:\n  " + strings.Repeat("a", 65) + ": {retry: read_only}\n", `bad.yaml:2: tools: invalid tool name "aaaa`},
		{"tool name not a scalar", "tools:\n  ? [a]\n  : {retry: read_only}\n", `bad.yaml:3: YAML syntax: found an invalid key for this map`},
		{"unknown tool key", "tools:\n  a:\n    retry: read_only\n    retries: 3\n", `bad.yaml:4: tools.a.retries: unknown key "retries" (want description,`},
		{"missing retry", "tools:\n  a:\n    match_window: 1h\n", `bad.yaml:2: tools.a.retry: missing (want read_only, idempotency_key, status_query, irreversible)`},
		{"null tool", "tools:\n  a:\n", `bad.yaml:2: tools.a.retry: missing`},
		{"empty retry", "tools:\n  a:\n    retry:\n", `bad.yaml:3: tools.a.retry: value is missing`},
		{"unknown retry", "tools:\n  deploy_release:\n    retry: sometimes\n    match_window: 1h\n", `bad.yaml:3: tools.deploy_release.retry: unknown retry class "sometimes" (want read_only, idempotency_key, status_query, irreversible)`},
		{"retry is a list", "tools:\n  a:\n    retry: [read_only]\n", `bad.yaml:3: tools.a.retry: want a string, got a list`},
		{"missing match_window", "tools:\n  a:\n    retry: status_query\n", `bad.yaml:2: tools.a.match_window: missing (want a duration`},
		{"bad duration", "tools:\n  a:\n    retry: status_query\n    match_window: 1 hour\n", `bad.yaml:4: tools.a.match_window: invalid duration "1 hour"`},
		{"duration without unit", "tools:\n  a:\n    retry: status_query\n    match_window: 10\n", `bad.yaml:4: tools.a.match_window: invalid duration "10"`},
		{"key_retention under 24h", "tools:\n  a:\n    retry: status_query\n    match_window: 1h\n    key_retention: 23h\n", `bad.yaml:5: tools.a.key_retention: duration "23h" is shorter than the 24h minimum`},
		{"key_retention not a duration", "tools:\n  a:\n    retry: status_query\n    match_window: 1h\n    key_retention: forever\n", `bad.yaml:5: tools.a.key_retention: invalid duration "forever" (want a Go duration such as 48h, or ledger)`},
		{"unknown intent_scope", "tools:\n  a:\n    retry: status_query\n    match_window: 1h\n    intent_scope: socket\n", `bad.yaml:5: tools.a.intent_scope: unknown intent scope "socket" (want agent, session)`},
		{"zero duration", "tools:\n  a:\n    retry: status_query\n    match_window: 0s\n", `bad.yaml:4: tools.a.match_window: duration "0s" must be greater than 0`},
		{"negative duration", "tools:\n  a:\n    retry: idempotency_key\n    match_window: -5m\n", `bad.yaml:4: tools.a.match_window: duration "-5m" must be greater than 0`},
		{"duration too long", "tools:\n  a:\n    retry: irreversible\n    match_window: 721h\n", `bad.yaml:4: tools.a.match_window: duration "721h" is longer than the 720h maximum`},
		{"read_only bad window still checked", "tools:\n  a:\n    retry: read_only\n    match_window: soon\n", `bad.yaml:4: tools.a.match_window: invalid duration "soon"`},
		{"unknown approval", "tools:\n  a:\n    retry: read_only\n    approval: always\n", `bad.yaml:4: tools.a.approval: unknown approval mode "always" (want session, per_use)`},
		{"unknown channel", "tools:\n  a:\n    retry: read_only\n    channel: ftp\n", `bad.yaml:4: tools.a.channel: unknown channel "ftp" (want http, ssh, mcp)`},
		{"description not a string", "tools:\n  a:\n    retry: read_only\n    description: {x: 1}\n", `bad.yaml:4: tools.a.description: want a string, got a mapping`},
		{"target null", "tools:\n  a:\n    retry: read_only\n    target:\n", `bad.yaml:4: tools.a.target: value is missing`},
		{"input_schema not a mapping", "tools:\n  a:\n    retry: read_only\n    input_schema: [object]\n", `bad.yaml:4: tools.a.input_schema: want a mapping, got a list`},
		{"input_schema NaN", "tools:\n  a:\n    retry: read_only\n    input_schema:\n      maximum: .inf\n", `bad.yaml:5: tools.a.input_schema.maximum: number .inf cannot be written in JSON`},
		{"fingerprint not a mapping", "tools:\n  a:\n    retry: read_only\n    fingerprint: [comment]\n", `bad.yaml:4: tools.a.fingerprint: want a mapping, got a list`},
		{"unknown fingerprint key", "tools:\n  a:\n    retry: read_only\n    fingerprint:\n      ignored: [comment]\n", `bad.yaml:5: tools.a.fingerprint.ignored: unknown key "ignored" (want defaults, ignore, secrets)`},
		{"ignore not a list", "tools:\n  a:\n    retry: read_only\n    fingerprint:\n      ignore: comment\n", `bad.yaml:5: tools.a.fingerprint.ignore: want a list, got a string`},
		{"empty path", "tools:\n  a:\n    retry: read_only\n    fingerprint:\n      ignore: ['']\n", `bad.yaml:5: tools.a.fingerprint.ignore[0]: path is empty`},
		{"path with empty name", "tools:\n  a:\n    retry: read_only\n    fingerprint:\n      secrets: [ok, spec..token]\n", `bad.yaml:5: tools.a.fingerprint.secrets[1]: path "spec..token" has an empty name`},
		{"path with trailing dot", "tools:\n  a:\n    retry: read_only\n    fingerprint:\n      secrets:\n        - token.\n", `bad.yaml:6: tools.a.fingerprint.secrets[0]: path "token." has an empty name`},
		{"path not a string", "tools:\n  a:\n    retry: read_only\n    fingerprint:\n      ignore: [{a: b}]\n", `bad.yaml:5: tools.a.fingerprint.ignore[0]: want a string, got a mapping`},
		{"path listed twice", "tools:\n  a:\n    retry: read_only\n    fingerprint:\n      ignore: [c, c]\n", `bad.yaml:5: tools.a.fingerprint.ignore[1]: path "c" is listed twice`},
		{"ignored and secret", "tools:\n  a:\n    retry: read_only\n    fingerprint:\n      ignore: [token]\n      secrets:\n        - token\n", `bad.yaml:7: tools.a.fingerprint.secrets[0]: path "token" is also in ignore (a path is either ignored or secret)`},
		{"defaults not a mapping", "tools:\n  a:\n    retry: read_only\n    fingerprint:\n      defaults: [region]\n", `bad.yaml:5: tools.a.fingerprint.defaults: want a mapping of path: value, got a list`},
		{"defaults bad path", "tools:\n  a:\n    retry: read_only\n    fingerprint:\n      defaults:\n        .region: x\n", `bad.yaml:6: tools.a.fingerprint.defaults..region: path ".region" has an empty name`},
		{"defaults NaN", "tools:\n  a:\n    retry: read_only\n    fingerprint:\n      defaults: {ratio: .nan}\n", `bad.yaml:5: tools.a.fingerprint.defaults.ratio: number .nan cannot be written in JSON`},
		{"gateway not a mapping", "gateway: gw1\n", `bad.yaml:1: gateway: want a mapping, got a string`},
		{"unknown gateway key", "gateway:\n  name: gw1\n", `bad.yaml:2: gateway.name: unknown key "name" (want id)`},
		{"gateway id chars", "gateway:\n  id: gw.1\n", `bad.yaml:2: gateway.id: invalid gateway id "gw.1" (want 1-32 characters`},
		{"gateway id too long", "gateway:\n  id: " + strings.Repeat("g", 33) + "\n", `bad.yaml:2: gateway.id: invalid gateway id`},
		{"gateway id empty", "gateway:\n  id: ''\n", `bad.yaml:2: gateway.id: invalid gateway id ""`},
		{"tag", "tools:\n  a:\n    retry: !!str read_only\n", `bad.yaml:3: tools.a.retry: YAML tags such as !!str are not supported`},
		{"merge key", "base: &b {retry: read_only}\ntools:\n  a:\n    <<: *b\n", `bad.yaml:4: tools.a: merge keys (<<) are not supported`},
		{"alias without anchor", "tools:\n  a:\n    retry: *nothing\n", `bad.yaml:3: tools.a.retry: alias *nothing has no anchor before it`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse("bad.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", cfg)
			}
			if cfg != nil {
				t.Errorf("Parse returned a config with its error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error\n%v\ndoes not contain\n%s", err, tt.want)
			}
			var e *Error
			if !errors.As(err, &e) || e.File != "bad.yaml" || e.Reason == "" {
				t.Errorf("error %#v is not a complete *Error", err)
			}
		})
	}
}

// TestParseAllErrors checks that problems are reported together, in file order.
func TestParseAllErrors(t *testing.T) {
	yaml := `tools:
  a:
    retry: sometimes
  b:
    retry: status_query
    match_window: 0s
extra: 1
`
	_, err := Parse("bad.yaml", []byte(yaml))
	if err == nil {
		t.Fatal("accepted")
	}
	want := []string{
		`bad.yaml:3: tools.a.retry: unknown retry class "sometimes"`,
		`bad.yaml:6: tools.b.match_window: duration "0s" must be greater than 0`,
		`bad.yaml:7: extra: unknown key "extra"`,
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("error %d = %q, want prefix %q", i, lines[i], w)
		}
	}
}

func TestParseTooManyErrors(t *testing.T) {
	var b strings.Builder
	b.WriteString("tools:\n")
	for i := range 30 {
		b.WriteString("  t" + strconv.Itoa(i) + ": {retry: never}\n")
	}
	_, err := Parse("bad.yaml", []byte(b.String()))
	if err == nil {
		t.Fatal("accepted")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != maxErrors+1 || !strings.Contains(lines[maxErrors], "more than 20 errors") {
		t.Errorf("got %d lines, last %q", len(lines), lines[len(lines)-1])
	}
}

func TestParseAliasBomb(t *testing.T) {
	// Each level doubles; unbounded expansion would be 2^30 values.
	var b strings.Builder
	b.WriteString("tools:\n  a:\n    retry: read_only\n    input_schema:\n      l0: &l0 [x, x]\n")
	for i := 1; i <= 30; i++ {
		prev := "l" + strconv.Itoa(i-1)
		b.WriteString("      l" + strconv.Itoa(i) + ": &l" + strconv.Itoa(i) + " [*" + prev + ", *" + prev + "]\n")
	}
	_, err := Parse("bomb.yaml", []byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "more than 100000 values") {
		t.Errorf("err = %v, want the value limit", err)
	}
}

func TestParseTooLarge(t *testing.T) {
	data := []byte("# " + strings.Repeat("x", MaxFileBytes) + "\ntools: {}\n")
	_, err := Parse("big.yaml", data)
	if err == nil || !strings.Contains(err.Error(), "big.yaml: file is larger than the 1048576-byte (1 MiB) limit") {
		t.Errorf("err = %v", err)
	}
	path := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "1 MiB") {
		t.Errorf("Load err = %v", err)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "nope.yaml") {
		t.Errorf("err = %v", err)
	}
}

func TestLoadReportsPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(path, []byte("tools:\n  x:\n    retry: never\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.HasPrefix(err.Error(), path+":3: tools.x.retry: unknown retry class") {
		t.Errorf("err = %v", err)
	}
}

// TestExampleConfig loads the README quickstart config and checks it covers
// every retry class and both approval modes.
func TestExampleConfig(t *testing.T) {
	cfg, err := Load("../examples/portcullis.yaml")
	if err != nil {
		t.Fatal(err)
	}
	book := cfg.Contracts()
	classes := map[contract.RetryClass]bool{}
	approvals := map[contract.Approval]bool{}
	for name, c := range book {
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		classes[c.Retry] = true
		approvals[c.Approval] = true
	}
	for _, c := range contract.RetryClasses {
		if !classes[c] {
			t.Errorf("no tool with retry class %s", c)
		}
	}
	if !approvals[contract.ApprovalSession] || !approvals[contract.ApprovalPerUse] {
		t.Errorf("approval modes covered: %v", approvals)
	}
	pay, ok := book.Lookup("create_payment")
	if !ok || pay.Retry != contract.IdempotencyKey || pay.MatchWindow.Duration != 10*time.Minute ||
		!reflect.DeepEqual(pay.Fingerprint.Secrets, []string{"card_token"}) {
		t.Errorf("create_payment = %+v", pay)
	}
	deploy := cfg.Tools["deploy_release"]
	if deploy.Contract.MatchWindow.Duration != time.Hour || deploy.Channel != "http" || !json.Valid(deploy.InputSchema) {
		t.Errorf("deploy_release = %+v", deploy)
	}
	rotate := book["rotate_credentials"]
	if !rotate.MatchWindow.UntilResolved || rotate.Approval != contract.ApprovalPerUse || rotate.Retry != contract.Irreversible {
		t.Errorf("rotate_credentials = %+v", rotate)
	}
	// The example leaves the gateway id out: every gateway started from it
	// keeps its own id in its data dir, so two of them never share one.
	if cfg.GatewayID != "" {
		t.Error("example pins a gateway id")
	}
}
