package config

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"

	"github.com/portcullis-dev/portcullis/contract"
)

var (
	toolNameRE  = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,64}$`)
	gatewayIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
)

// untilResolved is the match_window that absorbs retries while the prior
// execution is not terminal.
const untilResolved = "until_resolved"

// config decodes the top level: tools and gateway.
func (d *decoder) config(n ast.Node) *Config {
	cfg := &Config{Path: d.path, Tools: map[string]Tool{}}
	entries, _ := d.mapping(n, "")
	for _, e := range entries {
		switch e.key {
		case "tools":
			d.tools(e, cfg)
		case "gateway":
			d.gateway(e, cfg)
		case "agents":
			d.agents(e, cfg)
		case "vault":
			d.vault(e, cfg)
		case "upstreams":
			d.upstreams(e, cfg)
		case "callers":
			d.callers(e, cfg)
		default:
			d.unknownKey(e, "tools, gateway, agents, callers, vault, upstreams")
		}
	}
	return cfg
}

// agents decodes agents: {ACTOR: {token_sha256: HEX}}.
func (d *decoder) agents(a entry, cfg *Config) {
	entries, ok := d.mapping(a.value, a.path)
	if !ok {
		return
	}
	cfg.Agents = map[string]string{}
	for _, ag := range entries {
		fields, ok := d.mapping(ag.value, ag.path)
		if !ok {
			continue
		}
		for _, f := range fields {
			switch f.key {
			case "token_sha256":
				h, ok := d.str(f)
				if !ok {
					continue
				}
				if len(h) != 64 || strings.Trim(strings.ToLower(h), "0123456789abcdef") != "" {
					d.errorf(f.value, f.path, "want the 64-hex-digit SHA-256 of the agent's bearer token (sha256sum), got %d characters", len(h))
					continue
				}
				if d.claimToken(f.value, f.path, strings.ToLower(h), "agent "+ag.key) {
					cfg.Agents[strings.ToLower(h)] = ag.key
				}
			default:
				d.unknownKey(f, "token_sha256")
			}
		}
	}
}

// upstreams decodes upstreams: {NAME: {url, credential_ref}}.
func (d *decoder) upstreams(u entry, cfg *Config) {
	entries, ok := d.mapping(u.value, u.path)
	if !ok {
		return
	}
	cfg.Upstreams = map[string]Upstream{}
	for _, up := range entries {
		fields, ok := d.mapping(up.value, up.path)
		if !ok {
			continue
		}
		x := Upstream{Name: up.key}
		for _, f := range fields {
			switch f.key {
			case "url":
				x.URL, _ = d.str(f)
			case "credential_ref":
				x.CredentialRef, _ = d.str(f)
			default:
				d.unknownKey(f, "url, credential_ref")
			}
		}
		if x.URL == "" {
			d.errorf(up.value, up.path+".url", "missing (want the upstream's Streamable HTTP endpoint)")
			continue
		}
		cfg.Upstreams[up.key] = x
	}
}

// vault decodes vault: {locked: BOOL}.
func (d *decoder) vault(v entry, cfg *Config) {
	entries, ok := d.mapping(v.value, v.path)
	if !ok {
		return
	}
	for _, e := range entries {
		switch e.key {
		case "locked":
			s, ok := d.str(e)
			if !ok {
				continue
			}
			switch s {
			case "true":
				cfg.VaultLocked = true
			case "false":
			default:
				d.errorf(e.value, e.path, "want true or false, got %q", s)
			}
		default:
			d.unknownKey(e, "locked")
		}
	}
}

// gateway decodes gateway: {id}.
func (d *decoder) gateway(g entry, cfg *Config) {
	entries, _ := d.mapping(g.value, g.path)
	for _, e := range entries {
		switch e.key {
		case "id":
			id, ok := d.str(e)
			switch {
			case !ok:
			case len(id) > maxGatewayIDLen || !gatewayIDRE.MatchString(id):
				d.errorf(e.value, e.path, "invalid gateway id %q (want 1-%d characters from A-Z a-z 0-9 _ -)", id, maxGatewayIDLen)
			default:
				cfg.GatewayID = id
			}
		default:
			d.unknownKey(e, "id")
		}
	}
}

// tools decodes tools: {name: tool}.
func (d *decoder) tools(t entry, cfg *Config) {
	entries, _ := d.mapping(t.value, t.path)
	for _, e := range entries {
		if !toolNameRE.MatchString(e.key) {
			d.errorf(e.node, t.path, "invalid tool name %q (want 1-64 characters from A-Z a-z 0-9 _ . -)", e.key)
			continue
		}
		if tool, ok := d.tool(e); ok {
			cfg.Tools[tool.Name] = tool
		}
	}
}

// tool decodes one tool: its definition and its contract.
func (d *decoder) tool(t entry) (Tool, bool) {
	tool := Tool{Name: t.key, Contract: contract.Contract{Tool: t.key, Approval: contract.ApprovalSession}}
	entries, ok := d.mapping(t.value, t.path)
	if !ok {
		return tool, false
	}
	var window *entry
	var retrySet bool
	for _, e := range entries {
		var fok = true
		switch e.key {
		case "description":
			tool.Description, fok = d.str(e)
		case "target":
			tool.Target, fok = d.str(e)
		case "credential_ref":
			tool.CredentialRef, fok = d.str(e)
		case "method":
			tool.Method, fok = d.str(e)
		case "channel":
			tool.Channel, fok = d.str(e)
			if fok && !slices.Contains(channels, tool.Channel) {
				d.errorf(e.value, e.path, "unknown channel %q (want %s)", tool.Channel, strings.Join(channels, ", "))
				fok = false
			}
		case "input_schema":
			tool.InputSchema, fok = d.jsonObject(e)
		case "retry":
			retrySet = true
			var s string
			if s, fok = d.str(e); fok {
				tool.Contract.Retry = contract.RetryClass(s)
				if !tool.Contract.Retry.Valid() {
					d.errorf(e.value, e.path, "unknown retry class %q (want %s)", s, retryClasses())
					fok = false
				}
			}
		case "match_window":
			window = &e
		case "key_retention":
			tool.Contract.KeyRetention, fok = d.keyRetention(e)
		case "intent_scope":
			var s string
			if s, fok = d.str(e); fok {
				tool.Contract.IntentScope = contract.IntentScope(s)
				if !tool.Contract.IntentScope.Valid() {
					d.errorf(e.value, e.path, "unknown intent scope %q (want %s, %s)", s, contract.ScopeAgent, contract.ScopeSession)
					fok = false
				}
			}
		case "approval":
			var s string
			if s, fok = d.str(e); fok {
				tool.Contract.Approval = contract.Approval(s)
				if !tool.Contract.Approval.Valid() {
					d.errorf(e.value, e.path, "unknown approval mode %q (want %s, %s)", s, contract.ApprovalSession, contract.ApprovalPerUse)
					fok = false
				}
			}
		case "fingerprint":
			tool.Contract.Fingerprint, fok = d.fingerprint(e)
		case "budget":
			tool.Contract.Budget, fok = d.budget(e)
		case "idempotency_header":
			tool.IdempotencyHeader, fok = d.str(e)
		case "status_url":
			tool.StatusURL, fok = d.str(e)
		case "host_key":
			tool.HostKey, fok = d.str(e)
		case "upstream":
			tool.Upstream, fok = d.str(e)
		case "command":
			tool.Command, fok = d.str(e)
		case "timeout":
			var s string
			if s, fok = d.str(e); fok {
				t, err := time.ParseDuration(s)
				if err != nil || t <= 0 || t > MaxMatchWindow {
					d.errorf(e.value, e.path, "want a positive duration like 30s, got %q", s)
					fok = false
				}
				tool.Timeout = t
				tool.Contract.Timeout = t
			}
		case "task_after":
			var s string
			if s, fok = d.str(e); fok {
				t, err := time.ParseDuration(s)
				if err != nil || t <= 0 || t > MaxMatchWindow {
					d.errorf(e.value, e.path, "want a positive duration like 2s, got %q", s)
					fok = false
				}
				tool.TaskAfter = t
			}
		default:
			d.unknownKey(e, "description, input_schema, channel, target, credential_ref, method, retry, match_window, key_retention, intent_scope, fingerprint, approval, budget, idempotency_header, status_url, timeout, task_after, host_key, command, upstream")
			fok = false
		}
		ok = ok && fok
	}
	if !retrySet {
		d.errorf(t.node, join(t.path, "retry"), "missing (want %s)", retryClasses())
		return tool, false
	}
	switch {
	case window != nil:
		w, wok := d.matchWindow(*window)
		ok = ok && wok
		if tool.Contract.Retry != contract.ReadOnly {
			tool.Contract.MatchWindow = w
		}
	case tool.Contract.Retry.Valid() && tool.Contract.Retry != contract.ReadOnly:
		d.errorf(t.node, join(t.path, "match_window"), "missing (want a duration such as 10m or 1h, or %s; only read_only tools may leave it out)", untilResolved)
		ok = false
	}
	if !ok {
		return tool, false
	}
	// Every rule above implies a valid contract; a failure here is a bug in
	// this package, reported rather than hidden.
	if err := tool.Contract.Validate(); err != nil {
		d.errorf(t.node, t.path, "invalid contract: %v", err)
		return tool, false
	}
	return tool, true
}

// retryClasses lists the retry classes for messages.
func retryClasses() string {
	names := make([]string, len(contract.RetryClasses))
	for i, c := range contract.RetryClasses {
		names[i] = string(c)
	}
	return strings.Join(names, ", ")
}

// matchWindow decodes a Go duration in (0, MaxMatchWindow] or until_resolved.
func (d *decoder) matchWindow(e entry) (contract.MatchWindow, bool) {
	s, ok := d.str(e)
	if !ok {
		return contract.MatchWindow{}, false
	}
	if s == untilResolved {
		return contract.MatchWindow{UntilResolved: true}, true
	}
	dur, err := time.ParseDuration(s)
	switch {
	case err != nil:
		d.errorf(e.value, e.path, "invalid duration %q (want a Go duration such as 10m or 1h, or %s)", s, untilResolved)
	case dur <= 0:
		d.errorf(e.value, e.path, "duration %q must be greater than 0 (or use %s)", s, untilResolved)
	case dur > MaxMatchWindow:
		d.errorf(e.value, e.path, "duration %q is longer than the %gh maximum (use %s for longer)", s, MaxMatchWindow.Hours(), untilResolved)
	default:
		return contract.MatchWindow{Duration: dur}, true
	}
	return contract.MatchWindow{}, false
}

// keyRetention decodes a Go duration of at least contract.MinKeyRetention,
// or "ledger" (as long as the ledger keeps the execution).
func (d *decoder) keyRetention(e entry) (contract.KeyRetention, bool) {
	s, ok := d.str(e)
	if !ok {
		return contract.KeyRetention{}, false
	}
	if s == contract.KeyRetentionLedger {
		return contract.KeyRetention{}, true
	}
	dur, err := time.ParseDuration(s)
	switch {
	case err != nil:
		d.errorf(e.value, e.path, "invalid duration %q (want a Go duration such as 48h, or %s)", s, contract.KeyRetentionLedger)
	case dur < contract.MinKeyRetention:
		d.errorf(e.value, e.path, "duration %q is shorter than the %gh minimum (an operation key must outlive every retry of its operation; use at least 24h, or %s)", s, contract.MinKeyRetention.Hours(), contract.KeyRetentionLedger)
	default:
		return contract.KeyRetention{Duration: dur}, true
	}
	return contract.KeyRetention{}, false
}

// fingerprint decodes the fingerprint rules: defaults, ignore, secrets.
func (d *decoder) fingerprint(f entry) (contract.FingerprintRules, bool) {
	var rules contract.FingerprintRules
	entries, ok := d.mapping(f.value, f.path)
	if !ok {
		return rules, false
	}
	var secretNodes []ast.Node
	for _, e := range entries {
		var fok bool
		switch e.key {
		case "defaults":
			rules.Defaults, fok = d.defaults(e)
		case "ignore":
			rules.Ignore, _, fok = d.paths(e)
		case "secrets":
			rules.Secrets, secretNodes, fok = d.paths(e)
		default:
			d.unknownKey(e, "defaults, ignore, secrets")
		}
		ok = ok && fok
	}
	for i, p := range rules.Secrets {
		if slices.Contains(rules.Ignore, p) {
			d.errorf(secretNodes[i], fmt.Sprintf("%s.secrets[%d]", f.path, i), "path %q is also in ignore (a path is either ignored or secret)", p)
			ok = false
		}
	}
	return rules, ok
}

// budget decodes a tool's budget binding: account and amount (literals or
// "$.argument.path"), optional currency.
func (d *decoder) budget(b entry) (*contract.BudgetBinding, bool) {
	bind := &contract.BudgetBinding{}
	entries, ok := d.mapping(b.value, b.path)
	if !ok {
		return nil, false
	}
	for _, e := range entries {
		var fok bool
		switch e.key {
		case "account":
			bind.Account, fok = d.str(e)
		case "amount":
			if bind.Amount, fok = d.str(e); fok {
				if _, isPath := contract.ArgumentPath(bind.Amount); !isPath {
					if n, err := strconv.ParseInt(bind.Amount, 10, 64); err != nil || n <= 0 {
						d.errorf(e.value, e.path, "want a positive whole amount in minor units or an argument path like $.amount, got %q", bind.Amount)
						fok = false
					}
				}
			}
		case "currency":
			bind.Currency, fok = d.str(e)
		default:
			d.unknownKey(e, "account, amount, currency")
		}
		ok = ok && fok
	}
	if ok && (bind.Account == "" || bind.Amount == "") {
		d.errorf(b.value, b.path, "needs account and amount")
		ok = false
	}
	return bind, ok
}

// paths decodes a list of distinct fingerprint paths.
func (d *decoder) paths(e entry) ([]string, []ast.Node, bool) {
	items, nodes, ok := d.list(e)
	seen := map[string]bool{}
	for i, p := range items {
		key := fmt.Sprintf("%s[%d]", e.path, i)
		if reason := checkPath(p); reason != "" {
			d.errorf(nodes[i], key, "%s", reason)
			ok = false
		} else if seen[p] {
			d.errorf(nodes[i], key, "path %q is listed twice", p)
			ok = false
		}
		seen[p] = true
	}
	return items, nodes, ok
}

// defaults decodes the defaults mapping, path: value. Values take the types
// encoding/json gives tool arguments, so a default compares equal to the
// same value sent by a caller.
func (d *decoder) defaults(e entry) (map[string]any, bool) {
	n := d.resolve(e.value, e.path)
	switch n.(type) {
	case nil:
		return nil, false
	case *ast.NullNode:
		return nil, true
	case *ast.MappingNode, *ast.MappingValueNode:
	default:
		d.errorf(n, e.path, "want a mapping of path: value, got %s", kind(n))
		return nil, false
	}
	entries, ok := d.mapping(n, e.path)
	out := make(map[string]any, len(entries))
	for _, de := range entries {
		if reason := checkPath(de.key); reason != "" {
			d.errorf(de.node, de.path, "%s", reason)
			ok = false
			continue
		}
		v, vok := d.value(de.value, de.path, 1)
		if !vok {
			ok = false
			continue
		}
		out[de.key] = v
	}
	if !ok {
		return nil, false
	}
	// Round-trip through JSON so nested values have exactly the types a
	// decoded argument has.
	b, err := json.Marshal(out)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		d.errorf(n, e.path, "cannot be written as JSON: %v", err)
		return nil, false
	}
	return out, true
}

// checkPath returns why p is not a fingerprint path ("" when it is one):
// dot-separated, non-empty names.
func checkPath(p string) string {
	switch {
	case p == "":
		return "path is empty"
	case len(p) > maxPathLen:
		return fmt.Sprintf("path is longer than %d bytes", maxPathLen)
	}
	for _, name := range strings.Split(p, ".") {
		if name == "" {
			return fmt.Sprintf("path %q has an empty name (want dot-separated names such as spec.replicas)", p)
		}
		if strings.TrimSpace(name) != name {
			return fmt.Sprintf("path %q has a name with leading or trailing space", p)
		}
	}
	return ""
}
