package jetstream

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// StoredMsg is one message as a stream holds it.
type StoredMsg struct {
	Subject string
	Seq     uint64
	Data    []byte
}

// LeaderGetWait bounds one get from a stream's leader: without a leader
// (an election) it may not be answered at all, and a caller's fallback must
// still fit in its time (an enrolment look-up has 2 s).
const LeaderGetWait = time.Second

// LeaderMsg reads a message from the stream's leader
// ($JS.API.STREAM.MSG.GET), not from any replica as a direct get does: a
// replica serves direct gets once it is nearly caught up, so its "no such
// message" for one just stored is not final; the leader's is. With
// nextBySubj it is the first message on that filter at or after seq,
// otherwise the message at seq. nil, nil: the stream holds none.
func LeaderMsg(ctx context.Context, nc *nats.Conn, stream string, seq uint64, nextBySubj string) (*StoredMsg, error) {
	req, err := json.Marshal(struct {
		Seq        uint64 `json:"seq"`
		NextBySubj string `json:"next_by_subj,omitempty"`
	}{seq, nextBySubj})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, LeaderGetWait)
	defer cancel()
	what := fmt.Sprintf("get %s seq %d", stream, seq)
	if nextBySubj != "" {
		what = fmt.Sprintf("get %s from %d", nextBySubj, seq)
	}
	resp, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+stream, req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	var r struct {
		Message *struct {
			Subject string `json:"subject"`
			Seq     uint64 `json:"seq"`
			Data    []byte `json:"data"`
		} `json:"message"`
		Error *struct {
			Code        int    `json:"code"`
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return nil, fmt.Errorf("%s: unreadable answer: %w", what, err)
	}
	switch {
	case r.Error != nil && r.Error.ErrCode == int(jetstream.JSErrCodeMessageNotFound):
		return nil, nil
	case r.Error != nil:
		return nil, fmt.Errorf("%s: %w", what, &jetstream.APIError{Code: r.Error.Code, ErrorCode: jetstream.ErrorCode(r.Error.ErrCode), Description: r.Error.Description})
	case r.Message == nil:
		return nil, fmt.Errorf("%s: an answer without a message", what)
	}
	return &StoredMsg{Subject: r.Message.Subject, Seq: r.Message.Seq, Data: r.Message.Data}, nil
}
