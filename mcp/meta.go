package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/portcullis-dev/portcullis/config"
	"github.com/portcullis-dev/portcullis/contract"
	"github.com/portcullis-dev/portcullis/ledger"
)

// Our _meta keys are read strictly. A key that is present must hold what
// it is documented to hold; anything else is refused before anything is
// recorded, acknowledged or sent. Reading a malformed value as "absent"
// silently changed what a call meant: an operation key 1001 (a number)
// was dropped, so the next call with 1002 matched the first one by
// fingerprint and a second, different operation was swallowed; an object
// intent scope was dropped and widened the scope to the whole agent.
const metaPrefix = "io.portcullis/"

// requestMetaKeys are the io.portcullis/* keys a request may carry.
var requestMetaKeys = []string{MetaOperationKey, MetaIntentScope, MetaAck}

// callMeta is what a request's _meta says to the gateway.
type callMeta struct {
	operationKey string // MetaOperationKey or MetaIdemKey ("" when neither is present)
	intentScope  string // MetaIntentScope ("" when absent)
	acks         []string
}

// metaError is a request whose _meta holds one of our keys malformed.
type metaError struct{ msg string }

func (e *metaError) Error() string { return e.msg }

func badMeta(format string, args ...any) error {
	return &metaError{msg: fmt.Sprintf(format, args...) + "; nothing was recorded, acknowledged or sent"}
}

// readMeta checks every key of ours in a request's _meta (nil: none) and
// returns what they say. A key that is present must hold a non-empty
// string (the operation key, idempotency-key, the intent scope: at most
// ledger.MaxFieldBytes each), or for MetaAck an execution id or a list of
// 1 to maxAcks of them; an io.portcullis/* key we do not know is refused
// too, so a misspelt operation key is not silently a call without one.
func readMeta(meta map[string]any) (callMeta, error) {
	var cm callMeta
	if len(meta) == 0 {
		return cm, nil
	}
	var unknown []string
	for k := range meta {
		if strings.HasPrefix(k, metaPrefix) && k != MetaOperationKey && k != MetaIntentScope && k != MetaAck {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		why := fmt.Sprintf("unknown _meta key %q", unknown[0])
		if unknown[0] == MetaExecution {
			why += " (the gateway sets it on answers; to retry an operation send the same " + MetaOperationKey + ")"
		}
		return cm, badMeta("%s: a request may carry %s", why, strings.Join(requestMetaKeys, ", ")+" and "+MetaIdemKey)
	}
	op, opSet, err := metaField(meta, MetaOperationKey)
	if err != nil {
		return cm, err
	}
	idem, idemSet, err := metaField(meta, MetaIdemKey)
	if err != nil {
		return cm, err
	}
	if opSet && idemSet && op != idem {
		return cm, badMeta("_meta %q is %q but %q is %q: send one operation key", MetaOperationKey, op, MetaIdemKey, idem)
	}
	cm.operationKey = op
	if !opSet {
		cm.operationKey = idem
	}
	if cm.intentScope, _, err = metaField(meta, MetaIntentScope); err != nil {
		return cm, err
	}
	if cm.acks, err = metaAcks(meta); err != nil {
		return cm, err
	}
	return cm, nil
}

// checkKeyUse refuses an operation key on a call to a read_only tool,
// before anything is recorded (the ledger refuses it too; here it is the
// same JSON-RPC error as a malformed key, ledger.ReadOnlyKeyRefusal says
// why).
func checkKeyUse(msg message, cm callMeta, tools map[string]config.Tool) error {
	if msg.Method != "tools/call" || cm.operationKey == "" {
		return nil
	}
	t, ok := tools[msg.Params.Name]
	if !ok || t.Contract.Retry != contract.ReadOnly {
		return nil
	}
	return badMeta("_meta %q: %s", MetaOperationKey, ledger.ReadOnlyKeyRefusal(t.Name))
}

// metaField reads a string key: absent is ("", false, nil); present, it
// must be a non-empty string of at most ledger.MaxFieldBytes.
func metaField(meta map[string]any, key string) (string, bool, error) {
	v, ok := meta[key]
	if !ok {
		return "", false, nil
	}
	s, isString := v.(string)
	switch {
	case !isString:
		return "", true, badMeta("_meta %q must be a string, got %s", key, jsonKind(v))
	case s == "":
		return "", true, badMeta("_meta %q is empty: omit the key instead", key)
	case len(s) > ledger.MaxFieldBytes:
		return "", true, badMeta("_meta %q is %d bytes, at most %d", key, len(s), ledger.MaxFieldBytes)
	case !utf8.ValidString(s):
		return "", true, badMeta("_meta %q is not valid UTF-8", key)
	}
	return s, true, nil
}

// metaAcks reads MetaAck: an execution id or a list of 1 to maxAcks of
// them.
func metaAcks(meta map[string]any) ([]string, error) {
	v, ok := meta[MetaAck]
	if !ok {
		return nil, nil
	}
	var ids []string
	switch v := v.(type) {
	case string:
		ids = []string{v}
	case []any:
		if len(v) == 0 || len(v) > maxAcks {
			return nil, badMeta("_meta %q lists %d execution ids: send 1 to %d", MetaAck, len(v), maxAcks)
		}
		for i, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, badMeta("_meta %q[%d] must be an execution id (a string), got %s", MetaAck, i, jsonKind(e))
			}
			ids = append(ids, s)
		}
	default:
		return nil, badMeta("_meta %q must be an execution id or a list of them, got %s", MetaAck, jsonKind(v))
	}
	for _, id := range ids {
		if ledger.ValidateExecutionID(id) != nil {
			return nil, badMeta("_meta %q: %.64q is not an execution id (act_<ULID>)", MetaAck, id)
		}
	}
	return ids, nil
}

// jsonKind names a decoded JSON value's kind for an error message.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64, int, int64, json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// metaMayBeOurs reports whether params._meta may hold a key readMeta
// checks: false only when neither our prefix nor idempotency-key is in
// its text. A key written with escapes (any backslash) always counts as
// maybe, so nothing is missed.
func (m message) metaMayBeOurs() bool {
	meta := m.Params.Meta
	if len(meta) == 0 {
		return false
	}
	return bytes.IndexByte(meta, '\\') >= 0 || bytes.Contains(meta, []byte(`"`+metaPrefix)) ||
		bytes.Contains(meta, []byte(`"`+MetaIdemKey+`"`))
}

// readMeta checks the message's _meta (see readMeta).
func (m message) readMeta() (callMeta, error) {
	if !m.metaMayBeOurs() {
		return callMeta{}, nil
	}
	return readMeta(m.meta())
}
