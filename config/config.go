// Package config loads and validates the YAML file that
// `portcullis serve --config FILE` reads: the tool definitions, the tool
// contracts written next to them (DESIGN.md §5) and the gateway settings.
//
// A bad config is refused at start. Every error names the file, the line, the
// key path and the reason, for example:
//
//	examples/bad.yaml:7: tools.deploy_release.retry: unknown retry class "sometimes" (want read_only, idempotency_key, status_query, irreversible)
//
// Unknown keys are errors everywhere, so a typo never silently drops a rule.
//
// The package reads one file and does nothing else: it imports no NATS,
// Pebble or Connect, and it never logs.
package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/portcullis-dev/portcullis/contract"
)

// Limits on what a config may hold. Each is stated in the error that enforces it.
const (
	// MaxFileBytes is the largest config file Load and Parse accept.
	MaxFileBytes = 1 << 20
	// MaxMatchWindow is the longest match window a contract may name;
	// longer absorption should be until_resolved.
	MaxMatchWindow = 720 * time.Hour
	// maxGatewayIDLen is the longest gateway id.
	maxGatewayIDLen = 32
	// maxPathLen is the longest fingerprint path.
	maxPathLen = 256
	// maxValueDepth bounds nesting inside defaults and input_schema.
	maxValueDepth = 64
	// maxValueNodes bounds the YAML nodes read, aliases expanded, so that a
	// small file cannot expand into a huge one.
	maxValueNodes = 100_000
	// maxErrors is how many errors Parse reports before it stops.
	maxErrors = 20
)

// Config is a loaded, validated config file.
type Config struct {
	Path      string          // the file it came from, as given to Load or Parse
	GatewayID string          // gateway.id; "" when not set
	Tools     map[string]Tool // by tool name; never nil
	// Agents maps the SHA-256 (hex) of a bearer token to the actor it
	// authenticates on the MCP endpoint. The token itself is never stored.
	Agents map[string]string
	// Callers of the Connect API, in file order; none means one local
	// operator on a loopback listener.
	Callers []Caller
	// Upstreams are MCP servers whose tools the gateway proxies (each tool
	// still needs a contract here), by name.
	Upstreams map[string]Upstream
	// VaultLocked: the vault is locked and every agent action is refused
	// before anything is recorded or sent (vault: {locked: true}).
	VaultLocked bool
}

// Tool is one entry under tools: the tool definition the MCP gateway offers
// and the contract the ledger enforces for it.
type Tool struct {
	Name          string
	Description   string
	Channel       string // "http", "ssh" or "" when not set
	Target        string
	CredentialRef string
	Method        string
	InputSchema   []byte // JSON object; nil when absent
	// IdempotencyHeader names the header that carries the execution id to
	// an http target ("" = Idempotency-Key).
	IdempotencyHeader string
	// StatusURL is the target's status endpoint for status_query tools;
	// "{execution_id}" is replaced by the execution id.
	StatusURL string
	// Timeout bounds one dispatch (0 = the executor's default).
	Timeout time.Duration
	// HostKey pins an ssh target's host key (authorized_keys format); there
	// is no trust on first use.
	HostKey string
	// Command is what an ssh tool runs (sh -c; arguments as JSON on stdin).
	Command string
	// Upstream names the upstream MCP server of a channel: mcp tool.
	Upstream string
	Contract contract.Contract
}

// Channels the gateway can dispatch on.
var channels = []string{"http", "ssh", "mcp"}

// Load reads and validates the config file at path. The error of a bad
// config reads "path:line: key.path: reason", one line per problem.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", path, err)
	}
	return Parse(path, data)
}

// Parse validates data as a config file. path is used in error messages
// only. On error the result is nil and the error is an *Error, or several
// *Error joined with errors.Join (one line each), in file order.
func Parse(path string, data []byte) (*Config, error) {
	if len(data) > MaxFileBytes {
		return nil, &Error{File: path, Reason: fmt.Sprintf("file is larger than the %d-byte (1 MiB) limit", MaxFileBytes)}
	}
	d := newDecoder(path)
	cfg := d.file(data)
	if err := d.err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Contracts returns the contract of every tool, by tool name. The book is a
// fresh map; the contracts share their fingerprint defaults with c and must
// not be modified.
func (c *Config) Contracts() contract.Book {
	b := make(contract.Book, len(c.Tools))
	for name, t := range c.Tools {
		b[name] = t.Contract
	}
	return b
}

// Error is one problem in a config file.
type Error struct {
	File   string
	Line   int    // 1-based; 0 when the problem is the whole file
	Column int    // 1-based; 0 when unknown
	Key    string // key path such as "tools.deploy_release.retry"; "" for file-level problems
	Reason string
}

// Error renders "file:line: key: reason", leaving out what is unknown.
func (e *Error) Error() string {
	s := e.File
	if e.Line > 0 {
		s += fmt.Sprintf(":%d", e.Line)
	}
	if e.Key != "" {
		s += ": " + e.Key
	}
	return s + ": " + e.Reason
}

// joinErrors returns nil, the only error, or all of them joined.
func joinErrors(errs []*Error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	all := make([]error, len(errs))
	for i, e := range errs {
		all[i] = e
	}
	return errors.Join(all...)
}

// Upstream is an MCP server the gateway proxies.
type Upstream struct {
	Name          string
	URL           string // Streamable HTTP endpoint
	CredentialRef string // env:NAME or file:/path of a bearer token; "" = none
}
