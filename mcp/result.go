package mcp

import (
	"encoding/json"
	"fmt"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
)

// record is the structured part of every answer: what the ledger knows.
func record(state string, x *pb.Execution, why string) map[string]any {
	m := map[string]any{
		"state":        state,
		"execution_id": x.GetExecutionId(),
		"tool":         x.GetTool(),
		"attach_count": x.GetAttachCount(),
	}
	if x.GetDispatchedAt() != nil {
		m["first_dispatched_at"] = x.GetDispatchedAt().AsTime().UTC().Format(time.RFC3339Nano)
	}
	if x.GetResultReference() != "" { // an observed answer (exit status 0 included)
		m["target_status"] = x.GetTargetStatus()
		m["result_reference"] = x.GetResultReference()
	}
	if why != "" {
		m["why"] = why
	}
	return m
}

// storedResult returns the target's answer (also on a retry: the stored
// one). A 4xx/5xx answer is a result too, flagged as an error result.
func storedResult(x *pb.Execution, why string) *sdk.CallToolResult {
	rec := record("completed", x, why)
	if x.GetResultContentType() == mcpResultType {
		var up sdk.CallToolResult
		if err := json.Unmarshal([]byte(x.GetResultBody()), &up); err == nil {
			if up.StructuredContent == nil {
				up.StructuredContent = rec
			}
			up.Meta = sdk.Meta{MetaExecution: rec}
			return &up
		}
	}
	return &sdk.CallToolResult{
		Content:           []sdk.Content{&sdk.TextContent{Text: x.GetResultBody()}},
		StructuredContent: rec,
		IsError:           failed(x),
		Meta:              sdk.Meta{MetaExecution: rec},
	}
}

// stateResult says clearly where the execution stands and why nothing was
// (re)sent: not a fabricated error, so the agent can decide what to do.
func stateResult(state string, x *pb.Execution, why string) *sdk.CallToolResult {
	rec := record(state, x, why)
	text := fmt.Sprintf("%s: execution %s", state, x.GetExecutionId())
	if t, ok := rec["first_dispatched_at"]; ok {
		text += fmt.Sprintf(", first dispatched at %s", t)
	}
	if why != "" {
		text += "; " + why
	}
	return &sdk.CallToolResult{
		Content:           []sdk.Content{&sdk.TextContent{Text: text}},
		StructuredContent: rec,
		IsError:           state == "denied",
		Meta:              sdk.Meta{MetaExecution: rec},
	}
}

// refused answers a call the gateway did not accept (nothing recorded or
// sent, or nothing sent).
func refused(msg string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: msg}}, IsError: true}
}

// failed: the target's answer is an error (a 4xx/5xx status, a non-zero exit).
func failed(x *pb.Execution) bool {
	if x.GetChannel() == "ssh" || x.GetChannel() == "mcp" {
		return x.GetTargetStatus() != 0
	}
	return x.GetTargetStatus() >= 400
}
