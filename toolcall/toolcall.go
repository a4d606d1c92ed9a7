// Package toolcall binds a caller's request to the tool definition. The
// fields the definition fixes (channel, target, method, credential_ref)
// come from it, the arguments must match its input_schema, and the result
// is the fingerprint.Action the ledger digests. Both front doors (Connect
// Begin and /mcp) bind through it, so the same action gets the same
// fingerprint through either.
//
// It reads config and does no I/O; it imports no NATS, Pebble or Connect.
package toolcall

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/portcullis-dev/portcullis/config"
	"github.com/portcullis-dev/portcullis/contract"
	"github.com/portcullis-dev/portcullis/fingerprint"
)

// ErrInvalid: the request does not fit the tool definition (a fixed field
// differs, or the arguments break the input schema). Nothing is recorded.
var ErrInvalid = errors.New("request does not fit the tool definition")

// Request is one call as a front door received it. Actor is the
// authenticated caller's (never a body field on /mcp). Arguments is the raw
// text of one JSON object (empty means {}); numbers keep every digit.
type Request struct {
	Actor         string
	Tool          string
	Channel       string
	Target        string
	CredentialRef string
	Method        string
	IntentScope   string // "" = the authenticated agent
	Arguments     []byte
}

// Binder binds requests to the tools of one config, each input_schema
// compiled once.
type Binder struct {
	tools map[string]bound
}

type bound struct {
	tool   config.Tool
	schema *jsonschema.Resolved
}

// New compiles the input schema of every tool.
func New(tools map[string]config.Tool) (*Binder, error) {
	b := &Binder{tools: make(map[string]bound, len(tools))}
	for name, t := range tools {
		rs, err := compile(t)
		if err != nil {
			return nil, err
		}
		b.tools[name] = bound{tool: t, schema: rs}
	}
	return b, nil
}

// Bind binds req to its tool's definition. A tool the config does not
// define (or a nil Binder) passes the request through as given (the ledger
// refuses a tool without a contract).
func (b *Binder) Bind(req Request) (fingerprint.Action, error) {
	if b == nil {
		return action(req), nil
	}
	t, ok := b.tools[req.Tool]
	if !ok {
		return action(req), nil
	}
	return bind(t.tool, t.schema, req)
}

// Bind binds req to tool, compiling its input schema for this call.
func Bind(tool config.Tool, req Request) (fingerprint.Action, error) {
	rs, err := compile(tool)
	if err != nil {
		return fingerprint.Action{}, err
	}
	return bind(tool, rs, req)
}

// Scope is the intent scope of a call without an operation key: the
// caller's narrowing when given, else the contract's default, which is the
// authenticated agent ("": the actor is already in the canonical record)
// unless the contract chose the transport session.
func Scope(c contract.Contract, narrowing, session string) string {
	if narrowing != "" {
		return narrowing
	}
	if c.Scope() == contract.ScopeSession && session != "" {
		return "session:" + session
	}
	return ""
}

func compile(t config.Tool) (*jsonschema.Resolved, error) {
	schema := &jsonschema.Schema{Type: "object"}
	if len(t.InputSchema) > 0 {
		schema = new(jsonschema.Schema)
		if err := json.Unmarshal(t.InputSchema, schema); err != nil {
			return nil, fmt.Errorf("tool %s: input_schema: %w", t.Name, err)
		}
	}
	rs, err := schema.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("tool %s: input_schema: %w", t.Name, err)
	}
	return rs, nil
}

func bind(t config.Tool, schema *jsonschema.Resolved, req Request) (fingerprint.Action, error) {
	fixed := [...]struct {
		name string
		got  *string
		def  string
	}{
		{"channel", &req.Channel, t.Channel},
		{"target", &req.Target, t.Target},
		{"method", &req.Method, t.Method},
		{"credential_ref", &req.CredentialRef, t.CredentialRef},
	}
	for _, f := range fixed {
		switch {
		case f.def == "":
		case *f.got == "":
			*f.got = f.def
		case *f.got != f.def:
			return fingerprint.Action{}, fmt.Errorf("%w: action.%s %q differs from the definition of tool %s (leave it out, or send the defined value)", ErrInvalid, f.name, *f.got, t.Name)
		}
	}
	if len(req.Arguments) == 0 {
		req.Arguments = []byte("{}")
	}
	var inst any
	if err := json.Unmarshal(req.Arguments, &inst); err != nil {
		return fingerprint.Action{}, fmt.Errorf("%w: arguments are not JSON: %v", ErrInvalid, err)
	}
	if err := schema.Validate(inst); err != nil {
		return fingerprint.Action{}, fmt.Errorf("%w: arguments do not match the input schema of tool %s: %v", ErrInvalid, t.Name, err)
	}
	return action(req), nil
}

func action(req Request) fingerprint.Action {
	return fingerprint.Action{
		Actor: req.Actor, Tool: req.Tool, Channel: req.Channel, Target: req.Target, CredentialRef: req.CredentialRef,
		Method: req.Method, Arguments: req.Arguments, IntentScope: req.IntentScope,
	}
}
