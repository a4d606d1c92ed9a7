package mcp

import (
	"context"
	"encoding/json"
	"errors"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-dev/portcullis/config"
	"github.com/portcullis-dev/portcullis/dispatch"
	"github.com/portcullis-dev/portcullis/fingerprint"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
)

func metaString(m map[string]any, key string) string {
	if v, ok := m[key].(string); ok {
		return v
	}
	return ""
}

// callInput is one tools/call as the front door received it.
type callInput struct {
	actor     string
	tool      config.Tool
	args      json.RawMessage
	meta      map[string]any
	session   string // "" for stateless requests
	jsonrpcID string
}

// sessionScoped: the contract matches retries within one MCP session
// rather than within the agent.
//
// TODO(lead): return t.IntentScope == "session" once config.Tool carries
// the contract key intent_scope (branch ident).
func sessionScoped(t config.Tool) bool {
	_ = t
	return false
}

// intentScope picks the intent scope: _meta["io.portcullis/intent-scope"]
// narrows it; else the authenticated agent ("": the ledger reads it as the
// actor, bounded by the match window), or the session for a contract that
// asks for intent_scope: session. A reconnecting agent opens a new session
// and a 2026-07-28 client has none, so the session is not the default.
func intentScope(t config.Tool, meta map[string]any, session string) string {
	if s := metaString(meta, MetaIntentScope); s != "" {
		return s
	}
	if sessionScoped(t) && session != "" {
		return "session:" + session
	}
	return ""
}

// prepare checks one call and builds the ledger's input. A non-nil result
// is the refusal to answer (nothing was recorded or sent).
func (g *Gateway) prepare(c callInput) (ledger.BeginInput, *sdk.CallToolResult) {
	if g.locked {
		return ledger.BeginInput{}, refused("the vault is locked: no action is taken; nothing was recorded or sent")
	}
	args := []byte(c.args)
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}")
	}
	var inst any
	if err := json.Unmarshal(args, &inst); err != nil {
		return ledger.BeginInput{}, refused("arguments are not JSON: " + err.Error())
	}
	if err := g.schemas[c.tool.Name].Validate(inst); err != nil {
		return ledger.BeginInput{}, refused("arguments do not match the tool's input schema: " + err.Error() + "; nothing was recorded or sent")
	}
	opKey := metaString(c.meta, MetaOperationKey)
	if opKey == "" {
		opKey = metaString(c.meta, MetaIdemKey)
	}
	t := c.tool
	return ledger.BeginInput{
		Action: fingerprint.Action{Actor: c.actor, Tool: t.Name, Channel: t.Channel, Target: t.Target,
			CredentialRef: t.CredentialRef, Method: t.Method, Arguments: args, IntentScope: intentScope(t, c.meta, c.session)},
		OperationKey: opKey,
		Correlation:  &pb.Correlation{SessionId: c.session, JsonrpcId: c.jsonrpcID},
	}, nil
}

// call handles tools/call for one tool (through the SDK).
func (g *Gateway) call(t config.Tool) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		actor, ok := g.actor(req.Extra.Header)
		if !ok {
			return nil, errors.New("unauthenticated")
		}
		c := callInput{actor: actor, tool: t, args: req.Params.Arguments, meta: req.Params.GetMeta(),
			jsonrpcID: req.Extra.Header.Get(jsonrpcIDHeader)}
		if req.Session != nil {
			c.session = req.Session.ID()
		}
		in, refusal := g.prepare(c)
		if refusal != nil {
			return refusal, nil
		}
		a := g.driver.Run(ctx, t, in)
		if a.Refused && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if a.State == dispatch.StateCompleted {
			g.delivery.carry(req.Extra.Header.Get(requestHeader), a.Execution.GetExecutionId())
		}
		return toResult(a), nil
	}
}

// toResult is the driver's answer as MCP content.
func toResult(a dispatch.Answer) *sdk.CallToolResult {
	switch {
	case a.Refused:
		return refused(a.Why)
	case a.State == dispatch.StateCompleted:
		return storedResult(a.Execution, a.Why)
	}
	return stateResult(a.State, a.Execution, a.Why)
}
