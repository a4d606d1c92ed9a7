package server

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/portcullis-dev/portcullis/budget/keeper"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
	"github.com/portcullis-dev/portcullis/internal/natstest"
)

// A forwarded budget command is answered on the forwarder's answer
// subject (pcrpc.answer.…), which the gateway user may publish to, not in
// an inbox; nobody serving the leader's subject is keeper.ErrNoLeader at
// once. On a NATS whose gateway user still has the permissions of an older
// version (no answer subjects, allow_responses) the forwarder says so and
// uses plain request/reply.
func TestBudgetForwarderAnswers(t *testing.T) {
	old := oldGatewayPermissions()
	for _, tc := range []struct {
		name  string
		perms *natsserver.Permissions // of the gateway user; nil: natsauth's
	}{{"current permissions", nil}, {"permissions of an older version", old}} {
		t.Run(tc.name, func(t *testing.T) {
			url, dir := startWithGatewayPermissions(t, tc.perms)
			leader := natstest.Connect(t, url, dir, natsauth.Gateway)
			var (
				mu      sync.Mutex
				replies []string
			)
			if _, err := leader.Subscribe(natsauth.BudgetRPCPrefix+"gw-lead", func(m *nats.Msg) {
				mu.Lock()
				replies = append(replies, m.Reply)
				mu.Unlock()
				_ = m.Respond(append([]byte("answer to "), m.Data...))
			}); err != nil {
				t.Fatal(err)
			}
			if err := leader.Flush(); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			f, err := newBudgetForwarder(natstest.Connect(t, url, dir, natsauth.Gateway), slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			if warned := strings.Contains(logs.String(), "permissions of an older version"); warned != (tc.perms != nil) {
				t.Fatalf("warned %v; log: %s", warned, logs.String())
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			for _, req := range []string{"one", "two"} {
				got, err := f.Forward(ctx, "gw-lead", []byte(req))
				if err != nil || string(got) != "answer to "+req {
					t.Fatalf("forward %s: %q, %v", req, got, err)
				}
			}
			wantPrefix := natsauth.BudgetAnswerPrefix
			if tc.perms != nil {
				wantPrefix = natsauth.InboxPrefix(natsauth.Gateway) + "."
			}
			mu.Lock()
			defer mu.Unlock()
			for _, r := range replies {
				if !strings.HasPrefix(r, wantPrefix) {
					t.Fatalf("answered on %q, want under %s", r, wantPrefix)
				}
			}
			start := time.Now()
			if _, err := f.Forward(ctx, "gw-gone", []byte("x")); !errors.Is(err, keeper.ErrNoLeader) {
				t.Fatalf("forward to nobody: %v, want ErrNoLeader", err)
			}
			if waited := time.Since(start); waited > time.Second {
				t.Fatalf("no responders took %s", waited)
			}
		})
	}
}

// oldGatewayPermissions are the gateway user's permissions before each
// role had its own inbox and answers their own subjects.
func oldGatewayPermissions() *natsserver.Permissions {
	p := natsauth.Permissions(natsauth.Gateway, NATSStreams())
	var pub []string
	for _, s := range p.Publish.Allow {
		if !strings.HasPrefix(s, natsauth.BudgetAnswerPrefix) {
			pub = append(pub, s)
		}
	}
	return &natsserver.Permissions{
		Publish:   &natsserver.SubjectPermission{Allow: pub},
		Subscribe: &natsserver.SubjectPermission{Allow: []string{"_INBOX.>", natsauth.BudgetRPCPrefix + "*"}},
		Response:  &natsserver.ResponsePermission{MaxMsgs: 1, Expires: time.Minute},
	}
}

// startWithGatewayPermissions runs a NATS server whose users are the
// ledger's, the gateway user with perms instead of its own when not nil.
func startWithGatewayPermissions(t *testing.T, perms *natsserver.Permissions) (string, string) {
	t.Helper()
	dir := t.TempDir()
	if err := natsauth.EnsureFiles(dir); err != nil {
		t.Fatal(err)
	}
	users, err := natsauth.Users(dir, NATSStreams())
	if err != nil {
		t.Fatal(err)
	}
	if perms != nil {
		if natsauth.Roles[0] != natsauth.Gateway {
			t.Fatal("the first user is not the gateway's")
		}
		users[0].Permissions = perms
	}
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, NoSigs: true, Nkeys: users})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats not ready")
	}
	t.Cleanup(ns.Shutdown)
	return ns.ClientURL(), dir
}
