package mcp

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/oklog/ulid/v2"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/ledger"
)

// The sessions journal: one subject per agent session on its own stream,
// separate from the executions, so an investigation can tell one agent
// process from two.
const (
	SessionsStream = "PORTCULLIS_SESSIONS"
	sessionPrefix  = "pc.session."
)

// SessionsSubjects are the subjects of the sessions stream.
var SessionsSubjects = []string{sessionPrefix + "*"}

// SessionSubject is the subject of one session's journal.
func SessionSubject(sessionID string) string {
	sum := sha256.Sum256([]byte(sessionID))
	return sessionPrefix + hex.EncodeToString(sum[:16])
}

// Journal appends session events, signed like every event.
type Journal struct {
	Log       ledger.Log
	Key       ed25519.PrivateKey
	GatewayID string
	Logger    *slog.Logger

	mu    sync.Mutex
	heads map[string]ledger.Head
}

func (j *Journal) append(ctx context.Context, sessionID string, body *pb.SessionChanged, types ...pb.EventType) {
	subj := SessionSubject(sessionID)
	j.mu.Lock()
	if j.heads == nil {
		j.heads = map[string]ledger.Head{}
	}
	head := j.heads[subj]
	j.mu.Unlock()
	var msgs []ledger.Message
	prev := head.Event.GetHash()
	var last *pb.Event
	for i, t := range types {
		ev := &pb.Event{EventId: "evt_" + ulid.Make().String(), Type: t, Subject: subj, TimeUnixNano: time.Now().UnixNano(),
			GatewayId: j.GatewayID, Body: &pb.Event_SessionChanged{SessionChanged: body}}
		ledger.Seal(ev, prev)
		ledger.Sign(ev, j.Key)
		prev, last = ev.Hash, ev
		msgs = append(msgs, ledger.Message{Subject: subj, ExpectedSeq: head.Seq, Follows: i > 0, Event: ev})
	}
	seqs, err := j.Log.Append(ctx, msgs...)
	if err != nil {
		j.Logger.Warn("sessions journal", "session", sessionID, "err", err)
		return
	}
	j.mu.Lock()
	if types[len(types)-1] == pb.EventType_EVENT_TYPE_SESSION_ENDED {
		delete(j.heads, subj)
	} else {
		j.heads[subj] = ledger.Head{Seq: seqs[len(seqs)-1], Event: last}
	}
	j.mu.Unlock()
}

// initialized records a session's start and authorization, and its end
// when the session closes.
func (g *Gateway) initialized(ctx context.Context, req *sdk.InitializedRequest) {
	if req.Session == nil || req.Session.ID() == "" {
		return // stateless requests have no session to journal
	}
	g.hold(req.Session.ID())
	g.claim(ctx, req.Session.ID())
	if g.journal == nil {
		go func() {
			_ = req.Session.Wait()
			g.mu.Lock()
			delete(g.sessionActors, req.Session.ID())
			g.release(req.Session.ID())
			g.mu.Unlock()
		}()
		return
	}
	var actor string
	if req.Extra != nil {
		actor, _ = g.actor(req.Extra.Header)
	}
	id := req.Session.ID()
	if actor == "" {
		g.mu.Lock()
		actor = g.sessionActors[id]
		g.mu.Unlock()
	}
	g.mu.Lock()
	remote := g.sessionRemote[id]
	g.mu.Unlock()
	body := &pb.SessionChanged{SessionId: id, Actor: actor, RemoteAddr: remote}
	if p := req.Session.InitializeParams(); p != nil {
		body.ProtocolVersion = p.ProtocolVersion
		if p.ClientInfo != nil {
			body.ClientName, body.ClientVersion = p.ClientInfo.Name, p.ClientInfo.Version
		}
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	g.journal.append(wctx, id, body, pb.EventType_EVENT_TYPE_SESSION_STARTED, pb.EventType_EVENT_TYPE_SESSION_AUTHORIZED)
	cancel()
	go func() {
		_ = req.Session.Wait()
		g.mu.Lock()
		delete(g.sessionActors, id)
		delete(g.sessionRemote, id)
		g.release(id)
		g.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		g.journal.append(ctx, id, body, pb.EventType_EVENT_TYPE_SESSION_ENDED)
	}()
}
