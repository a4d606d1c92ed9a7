package mcp

import (
	"context"
	"encoding/json"
	"errors"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-dev/portcullis/config"
	"github.com/portcullis-dev/portcullis/dispatch"
	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
	"github.com/portcullis-dev/portcullis/toolcall"
)

// callInput is one tools/call as the front door received it.
type callInput struct {
	actor     string
	tool      config.Tool
	args      json.RawMessage
	meta      map[string]any
	session   string // "" for stateless requests
	jsonrpcID string
}

// intentScope picks the intent scope as Connect Begin's callers do
// (toolcall.Scope): _meta["io.portcullis/intent-scope"] (narrowing,
// checked by readMeta) narrows it; else the authenticated agent ("": the
// ledger reads it as the actor, bounded by the match window), or the
// session for a contract with intent_scope: session. A reconnecting agent
// opens a new session and a 2026-07-28 client has none, so the session is
// not the default.
func intentScope(t config.Tool, narrowing, session string) string {
	return toolcall.Scope(t.Contract, narrowing, session)
}

// prepare checks one call and builds the ledger's input. A non-nil result
// is the refusal to answer (nothing was recorded or sent).
func (g *Gateway) prepare(c callInput) (ledger.BeginInput, *sdk.CallToolResult) {
	if g.locked {
		return ledger.BeginInput{}, refused("the vault is locked: no action is taken; nothing was recorded or sent")
	}
	// A malformed key of ours is refused, never read as absent (a dropped
	// operation key matched a different operation by fingerprint; a
	// dropped intent scope widened it to the whole agent).
	cm, err := readMeta(c.meta)
	if err != nil {
		return ledger.BeginInput{}, refused(err.Error())
	}
	t := c.tool
	args := []byte(c.args)
	if string(args) == "null" {
		args = nil // no arguments: {}
	}
	action, err := g.binder.Bind(toolcall.Request{Actor: c.actor, Tool: t.Name, Arguments: args,
		IntentScope: intentScope(t, cm.intentScope, c.session)})
	if err != nil {
		return ledger.BeginInput{}, refused(err.Error() + "; nothing was recorded or sent")
	}
	return ledger.BeginInput{
		Action:       action,
		OperationKey: cm.operationKey,
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
