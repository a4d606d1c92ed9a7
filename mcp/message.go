package mcp

import (
	"encoding/json"
)

// message is what the front door reads of one JSON-RPC message before the
// SDK sees it: enough to route it, record its id and find acknowledgements.
type message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method"`
	Params struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		TaskID    string          `json:"taskId"`
		Meta      map[string]any  `json:"_meta"`
	} `json:"params"`
}

// parseMessage reads a single JSON-RPC message; anything else (a batch,
// malformed JSON) yields an empty message and is left to the SDK to refuse.
func parseMessage(body []byte) message {
	var m message
	if err := json.Unmarshal(body, &m); err != nil {
		return message{}
	}
	return m
}

// jsonrpcID is the request's id as recorded in its correlation: a string
// id's value, a number's digits ("" for a notification).
func (m message) jsonrpcID() string {
	var s string
	if json.Unmarshal(m.ID, &s) == nil {
		return s
	}
	return string(m.ID)
}

// Names of the tasks extension (SEP-2663, schema 2026-07-28).
const (
	ExtTasks          = "io.modelcontextprotocol/tasks"
	metaClientCaps    = "io.modelcontextprotocol/clientCapabilities"
	methodTasksGet    = "tasks/get"
	methodTasksCancel = "tasks/cancel"
)

// declaresTasks: the request's per-request client capabilities list the
// tasks extension.
func (m message) declaresTasks() bool {
	caps, _ := m.Params.Meta[metaClientCaps].(map[string]any)
	ext, _ := caps["extensions"].(map[string]any)
	_, ok := ext[ExtTasks]
	return ok
}

// maxAcks bounds the execution ids one message may acknowledge.
const maxAcks = 64

// acks are the execution ids the message acknowledges (MetaAck: one id or
// a list).
func (m message) acks() []string {
	var ids []string
	switch v := m.Params.Meta[MetaAck].(type) {
	case string:
		ids = append(ids, v)
	case []any:
		for _, e := range v {
			if s, ok := e.(string); ok {
				ids = append(ids, s)
			}
		}
	}
	if len(ids) > maxAcks {
		ids = ids[:maxAcks]
	}
	return ids
}
