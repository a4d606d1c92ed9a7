package server

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/portcullis-dev/portcullis/internal/natsauth"
)

// A session owner record lives its TTL on a META that allows per-message
// TTLs. A META made before (no TTL allowed) is turned on only by the
// admin: a gateway's user says what to run, and its records are kept for
// good, claimed as before.
func TestSessionOwnerRecordsExpire(t *testing.T) {
	ctx := context.Background()
	js := jetStreamsAs(t, natsauth.Admin, natsauth.Gateway)
	admin, gw := js[0], js[1]
	old := metaConfig(1)
	old.AllowMsgTTL = false // as an earlier version made it
	if _, err := admin.CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&logs, nil))
	allowed := func() bool {
		t.Helper()
		s, err := admin.Stream(ctx, metaStream)
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo().Config.AllowMsgTTL
	}
	record := func(sid string) (*jetstream.RawStreamMsg, error) {
		s, err := admin.Stream(ctx, metaStream)
		if err != nil {
			t.Fatal(err)
		}
		return s.GetLastMsgForSubject(ctx, ownerSubject(sid))
	}

	// A gateway's user cannot change META: it says so and goes on.
	if err := allowMetaTTL(ctx, gw, false, lg); err != nil {
		t.Fatal(err)
	}
	if allowed() || !strings.Contains(logs.String(), "portcullis streams") {
		t.Fatalf("allowed %v, logs %q", allowed(), logs.String())
	}
	owners := &sessionOwners{js: gw, id: "gw-1", log: lg, ttl: time.Second}
	expires, err := owners.Claim(ctx, "sid-old", "http://127.0.0.1:1")
	if err != nil || !expires.IsZero() {
		t.Fatalf("claim on the old META: expires %v, %v", expires, err)
	}
	if m, err := record("sid-old"); err != nil || m.Header.Get(jetstream.MsgTTLHeader) != "" {
		t.Fatalf("record on the old META: %v %v", m, err)
	}

	// The admin turns TTLs on (as `portcullis streams` does); a claim from
	// then on expires.
	if err := allowMetaTTL(ctx, admin, true, lg); err != nil {
		t.Fatal(err)
	}
	if !allowed() {
		t.Fatal("the admin did not turn per-message TTLs on")
	}
	owners = &sessionOwners{js: gw, id: "gw-1", log: lg, ttl: time.Second}
	start := time.Now()
	expires, err = owners.Claim(ctx, "sid-new", "http://127.0.0.1:1")
	if err != nil || expires.Before(start.Add(time.Second)) {
		t.Fatalf("claim: expires %v (start %v), %v", expires, start, err)
	}
	if _, err := owners.Claim(ctx, "sid-new", "http://127.0.0.1:2"); err == nil {
		t.Fatal("a claim over another's live record was taken")
	}
	// This gateway's own record, not gone yet: kept, its expiry reported.
	again, err := owners.Claim(ctx, "sid-new", "http://127.0.0.1:1")
	if err != nil || again.Sub(expires).Abs() > 500*time.Millisecond {
		t.Fatalf("a claim again of its own live record: expires %v (first %v), %v", again, expires, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := record("sid-new")
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the owner record did not expire: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if lived := time.Since(start); lived < time.Second {
		t.Fatalf("the record expired after %v, before its TTL", lived)
	}
	if _, err := owners.Claim(ctx, "sid-new", "http://127.0.0.1:2"); err != nil {
		t.Fatalf("claim after the record expired: %v", err)
	}
	if _, err := record("sid-old"); err != nil {
		t.Fatalf("the record claimed without a TTL went: %v", err)
	}
	if again, err := owners.Claim(ctx, "sid-old", "http://127.0.0.1:1"); err != nil || !again.IsZero() {
		t.Fatalf("a claim again of its own record kept for good: expires %v, %v", again, err)
	}
}
