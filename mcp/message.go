package mcp

import (
	"bytes"
	"encoding/json"
)

// message is what the front door reads of one JSON-RPC message before the
// SDK sees it: enough to route it, record its id and find acknowledgements.
// params._meta stays raw: most requests carry none of our keys, so it is
// decoded only when one of them may be in it (metaHas).
type message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method"`
	Params struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		TaskID    string          `json:"taskId"`
		Meta      json.RawMessage `json:"_meta"`
	} `json:"params"`
}

// parseMessage reads a single JSON-RPC message; anything else (a batch,
// malformed JSON, a _meta that is not an object) yields an empty message
// and is left to the SDK to refuse.
func parseMessage(body []byte) message {
	var m message
	if err := json.Unmarshal(body, &m); err != nil {
		return message{}
	}
	switch meta := m.Params.Meta; {
	case len(meta) == 0:
	case string(meta) == "null":
		m.Params.Meta = nil
	case meta[0] != '{':
		return message{}
	}
	return m
}

// meta is params._meta decoded (nil when absent).
func (m message) meta() map[string]any {
	if len(m.Params.Meta) == 0 {
		return nil
	}
	var v map[string]any
	if json.Unmarshal(m.Params.Meta, &v) != nil {
		return nil
	}
	return v
}

// metaHas reports whether params._meta may hold key: false only when the
// key's text is not in it. A key written with escapes (any backslash)
// always counts as maybe, so nothing is missed.
func (m message) metaHas(key string) bool {
	meta := m.Params.Meta
	if len(meta) == 0 {
		return false
	}
	if bytes.IndexByte(meta, '\\') >= 0 {
		return true
	}
	return bytes.Contains(meta, []byte(`"`+key+`"`))
}

// jsonrpcID is the request's id as recorded in its correlation: a string
// id's value, a number's digits ("" for a notification).
func (m message) jsonrpcID() string {
	switch {
	case len(m.ID) == 0 || string(m.ID) == "null":
		return ""
	case m.ID[0] != '"':
		return string(m.ID)
	}
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
	if !m.metaHas(ExtTasks) {
		return false
	}
	caps, _ := m.meta()[metaClientCaps].(map[string]any)
	ext, _ := caps["extensions"].(map[string]any)
	_, ok := ext[ExtTasks]
	return ok
}

// maxAcks bounds the execution ids one message may acknowledge (more are
// refused: readMeta).
const maxAcks = 64
