package test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
	"github.com/portcullis-dev/portcullis/server"
	"github.com/portcullis-dev/portcullis/trust"
)

// Someone with the gateway NATS credentials seals a key of their own to a
// new gateway's box key and stores it first on the gateway's sealed-key
// subject (first write wins), as the audit's fpsquat did. The gateway
// never adopts it: not from that subject after an enrollment that carries
// no key (it refuses, names the forged record and writes nothing to its
// data dir), nor after `portcullis enroll`, which reports the record it
// did not write and delivers the key inside the root-signed enrollment,
// where nobody can store anything first.
func TestSquattedSealedKeyDoesNotBlockJoining(t *testing.T) {
	ctx := context.Background()
	d1 := t.TempDir()
	g1 := trustGateway(t, d1)
	d2 := t.TempDir()
	o2 := server.Options{DataDir: d2, Listen: "127.0.0.1:0", ConfigPath: writeConfig(t), NatsURL: g1.NatsURL, NatsCreds: credsFor(t, g1.NatsURL),
		GatewayID: "gw-2", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	_, err := server.Start(ctx, o2)
	m := regexp.MustCompile(`--public-key ([0-9a-f]{64}) --box-key ([0-9a-f]{64})`).FindStringSubmatch(fmt.Sprint(err))
	if m == nil {
		t.Fatalf("unenrolled gateway: %v", err)
	}
	pub, box := must(hex.DecodeString(m[1])), must(hex.DecodeString(m[2]))

	js := attacker(t, g1)
	theirs := make([]byte, 32)
	copy(theirs, "attacker's fingerprint key......")
	sum := sha256.Sum256(box)
	squatted := "pc.meta.fpkey.gw.gw-2." + hex.EncodeToString(sum[:8])
	if _, err := js.Publish(ctx, squatted, must(proto.Marshal(must(trust.SealKey(theirs, box))))); err != nil {
		t.Fatal(err)
	}

	// An enrollment without a key in it (as earlier versions' enroll made):
	// the squatted box is all the ledger holds for gw-2.
	rootKey := must(trust.LoadKey("file:" + g1.RootKeyPath))
	bare := trust.Enroll(rootKey, &pb.Enrollment{GatewayId: "gw-2", PublicKey: pub, ListenAddr: "http://127.0.0.1:1", EnrolledUnixNano: time.Now().UnixNano(), BoxPublicKey: box})
	if _, err := js.Publish(ctx, server.EnrollmentSubject(bare, "gw-2"), must(proto.Marshal(bare))); err != nil {
		t.Fatal(err)
	}
	_, err = server.Start(ctx, o2)
	if err == nil || !strings.Contains(err.Error(), squatted) || !strings.Contains(err.Error(), "does not match the ledger's key check") {
		t.Fatalf("gateway offered only a forged sealed key: %v", err)
	}
	if _, serr := os.Stat(filepath.Join(d2, "fingerprint.key")); serr == nil {
		t.Fatal("the gateway wrote a key it had not checked to its data dir")
	}

	out, err := exec.Command(binary, "enroll", "--nats-url", g1.NatsURL, "--data-dir", d1, "--root-key", "file:"+g1.RootKeyPath,
		"--gateway-id", "gw-2", "--public-key", m[1], "--box-key", m[2], "--addr", "http://127.0.0.1:1").CombinedOutput()
	if err != nil {
		t.Fatalf("enroll: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), squatted) || !strings.Contains(string(out), "did not write") {
		t.Fatalf("enroll did not report the record it found on %s:\n%s", squatted, out)
	}
	g2, err := server.Start(ctx, o2)
	if err != nil {
		t.Fatalf("gateway enrolled after the squat: %v", err)
	}
	defer g2.Close(ctx)
	if hex.EncodeToString(g2.Key) != testKey {
		t.Fatal("the enrolled gateway did not adopt the ledger's fingerprint key")
	}
	if kept := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(d2, "fingerprint.key"))))); kept != testKey {
		t.Fatalf("the data dir keeps %s", kept)
	}
	a := args(t, map[string]any{"amount": 11})
	first := must(client(g1).Begin(ctx, beginReq("create_payment", a, "", "1")))
	second, err := client(g2).Begin(ctx, beginReq("create_payment", a, "", "2"))
	if err != nil || second.Msg.GetExecution().GetExecutionId() != first.Msg.GetExecution().GetExecutionId() {
		t.Fatalf("retry through the gateway that joined: %v %v", second, err)
	}
}

// Junk enrollment records under a gateway id (records signed by a root the
// ledger does not have) and events claiming that id: each record is read
// and checked once, at most trust.EnrollRecordsMax of an id in all, however
// many events name it (before, every such event listed and checked every
// record again, and enough of them outlasted the look-up's wait, which the
// projector retried forever). The events are quarantined, the ledger goes
// on, and an enrollment stored under another id after a negative answer
// for it is still found.
func TestJunkEnrollmentRecordsAreReadOnce(t *testing.T) {
	ctx := context.Background()
	g := trustGateway(t, t.TempDir())
	c := client(g)
	first := must(c.Begin(ctx, beginReq("create_payment", args(t, map[string]any{"order": "junk-1"}), "", "1")))
	id := first.Msg.GetExecution().GetExecutionId()
	head := subjectEvents(t, ledgerStream(t, g), "pc.exec.*."+id)[0]

	js := attacker(t, g)
	_, rogueRoot, _ := ed25519.GenerateKey(nil)
	_, rogue, _ := ed25519.GenerateKey(nil)
	junk := trust.EnrollRecordsMax + 8
	for i := range junk {
		sr := trust.EnrollSelf(rogueRoot, rogue, "gw-slow", fmt.Sprintf("http://10.0.0.1:%d", i), time.Now())
		if _, err := js.PublishAsync(server.EnrollmentSubject(sr, "gw-slow"), must(proto.Marshal(sr))); err != nil {
			t.Fatal(err)
		}
	}
	// Three junk records under gw-late, which is enrolled later.
	_, late, _ := ed25519.GenerateKey(nil)
	for i := range 3 {
		sr := trust.EnrollSelf(rogueRoot, late, "gw-late", fmt.Sprintf("http://10.0.0.2:%d", i), time.Now())
		if _, err := js.PublishAsync(server.EnrollmentSubject(sr, "gw-late"), must(proto.Marshal(sr))); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		t.Fatal("junk records not stored")
	}
	records := uint64(junk + 3)
	waitQuarantined(t, g, records) // the trust-records projector quarantines each

	const events = 5
	for range events {
		for _, who := range []string{"gw-slow", "gw-late"} {
			ev := forge(head, pb.EventType_EVENT_TYPE_DISPATCHED, func(x *pb.Execution) { x.State = pb.State_STATE_DISPATCHED }, who, rogue)
			if _, err := js.Publish(ctx, head.GetSubject(), ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitQuarantined(t, g, records+2*events)
	if got, want := g.Keyring.Rejected(), uint64(trust.EnrollRecordsMax+3); got != want {
		t.Fatalf("the keyring checked %d enrollment records for %d events of unknown writers, want %d (each record once, at most %d of one id)", got, 2*events, want, trust.EnrollRecordsMax)
	}
	honestDecision(t, g, "after-junk-enrollments")

	// gw-late is enrolled now: its next event counts.
	rootKey := must(trust.LoadKey("file:" + g.RootKeyPath))
	sr := trust.EnrollSelf(rootKey, late, "gw-late", "http://10.0.0.2:1", time.Now())
	if _, err := js.Publish(ctx, server.EnrollmentSubject(sr, "gw-late"), must(proto.Marshal(sr))); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, head.GetSubject(), forge(head, pb.EventType_EVENT_TYPE_DISPATCHED, func(x *pb.Execution) { x.State = pb.State_STATE_DISPATCHED }, "gw-late", late)); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetExecution(ctx, connect.NewRequest(&pb.GetExecutionRequest{ExecutionId: id}))
	if err != nil || got.Msg.GetExecution().GetState() != pb.State_STATE_DISPATCHED {
		t.Fatalf("an event of a gateway enrolled after a negative look-up: %v %v", got, err)
	}
}
