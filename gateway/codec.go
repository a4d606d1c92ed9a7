package gateway

import (
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// StrictJSON makes the handlers refuse JSON requests that name a field the
// message does not have. connect-go's own JSON codec drops such fields, so
// a mistyped "operationkey" would turn a keyed Begin into a keyless one
// without a word; here it is invalid_argument naming the field. Binary
// protobuf requests keep protobuf's rule (unknown fields are skipped), so
// generated clients of a newer schema still work.
func StrictJSON() connect.HandlerOption {
	return connect.WithHandlerOptions(
		connect.WithCodec(strictJSON{"json"}),
		connect.WithCodec(strictJSON{"json; charset=utf-8"}),
	)
}

type strictJSON struct{ name string }

func (c strictJSON) Name() string { return c.name }

func (c strictJSON) Marshal(message any) ([]byte, error) {
	m, ok := message.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a protobuf message", message)
	}
	return protojson.Marshal(m)
}

func (c strictJSON) Unmarshal(data []byte, message any) error {
	m, ok := message.(proto.Message)
	if !ok {
		return fmt.Errorf("%T is not a protobuf message", message)
	}
	if len(data) == 0 {
		return errors.New("zero-length payload is not a valid JSON object")
	}
	if err := protojson.Unmarshal(data, m); err != nil {
		return fmt.Errorf("unmarshal into %T: %w", message, err)
	}
	return nil
}
