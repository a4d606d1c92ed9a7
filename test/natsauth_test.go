package test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/portcullis-dev/portcullis/budget/keeper"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
	"github.com/portcullis-dev/portcullis/internal/natstest"
	"github.com/portcullis-dev/portcullis/ledger"
	ljs "github.com/portcullis-dev/portcullis/ledger/jetstream"
	"github.com/portcullis-dev/portcullis/server"
)

// refusals collects the permission violations the server reports to one
// connection (a refused request is never answered; the server says why
// asynchronously).
type refusals struct {
	mu   sync.Mutex
	errs []string
	got  chan struct{}
}

func (r *refusals) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err.Error())
	r.mu.Unlock()
	select {
	case r.got <- struct{}{}:
	default:
	}
}

// wait waits (bounded) for a violation naming subject.
func (r *refusals) wait(t *testing.T, subject string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		r.mu.Lock()
		for _, e := range r.errs {
			if strings.Contains(e, "ermissions") && strings.Contains(e, subject) {
				r.mu.Unlock()
				return
			}
		}
		r.mu.Unlock()
		select {
		case <-r.got:
		case <-deadline:
			t.Fatalf("no permission violation for %s; got %v", subject, r.errs)
		}
	}
}

func connectAs(t *testing.T, g *server.Gateway, role natsauth.Role) (jetstream.JetStream, *refusals) {
	t.Helper()
	r := &refusals{got: make(chan struct{}, 1)}
	auth, err := natsauth.ClientOption(g.CredsFile(role))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(g.NatsURL, auth, natsauth.Inbox(role), nats.ErrorHandler(r.handler))
	if err != nil {
		t.Fatalf("connect as %s: %v", role, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js, r
}

// The embedded NATS requires authentication, and each user may do only
// what its role needs: a gateway appends but cannot delete, purge, create
// or change streams; finance and analyst read but cannot publish; admin can.
func TestNATSUsersAndPermissions(t *testing.T) {
	g := startGateway(t, "", nil)
	ctx := context.Background()
	short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, time.Second) }

	// The credential files are private.
	for _, r := range natsauth.Roles {
		fi, err := os.Stat(g.CredsFile(r))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: mode %v, want 0600", g.CredsFile(r), fi.Mode().Perm())
		}
	}

	// No credentials: refused at connect.
	if nc, err := nats.Connect(g.NatsURL); err == nil {
		nc.Close()
		t.Fatal("a client without credentials connected")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("connect without credentials: %v, want an authorization violation", err)
	}

	admin, _ := connectAs(t, g, natsauth.Admin)
	metaMsgs := func() uint64 {
		s, err := admin.Stream(ctx, "PORTCULLIS_META")
		if err != nil {
			t.Fatalf("META must still exist: %v", err)
		}
		return s.CachedInfo().State.Msgs
	}
	before := metaMsgs()

	// Gateway: appends to the ledger's subjects, reads streams; every
	// change of a stream is refused.
	gw, gwRefused := connectAs(t, g, natsauth.Gateway)
	if _, err := gw.Stream(ctx, ledger.ExecutionsStream); err != nil {
		t.Fatalf("gateway reads stream info: %v", err)
	}
	c, cancel := short()
	if err := gw.DeleteStream(c, "PORTCULLIS_META"); err == nil {
		t.Fatal("the gateway user deleted PORTCULLIS_META")
	}
	cancel()
	gwRefused.wait(t, "$JS.API.STREAM.DELETE.PORTCULLIS_META")
	// Creating a stream as the gateway is refused at once, with the fix
	// named, not retried as if the cluster were still electing.
	start := time.Now()
	_, err := ljs.EnsureConfig(ctx, gw, ljs.StreamSpec{Name: "GW_TEST", Subjects: []string{"gwtest.>"}, Replicas: 1}.Config(), nil)
	if err == nil || !strings.Contains(err.Error(), "only the NATS admin user") {
		t.Fatalf("gateway creates a stream: %v, want a refusal naming the admin user", err)
	}
	if waited := time.Since(start); waited > ljs.SetupWaitMax/2 {
		t.Fatalf("the refusal took %s: it was retried as transient", waited)
	}
	meta, err := gw.Stream(ctx, "PORTCULLIS_META")
	if err != nil {
		t.Fatal(err)
	}
	c, cancel = short()
	if err := meta.Purge(c); err == nil {
		t.Fatal("the gateway user purged PORTCULLIS_META")
	}
	cancel()
	gwRefused.wait(t, "$JS.API.STREAM.PURGE.PORTCULLIS_META")
	c, cancel = short()
	if _, err := gw.UpdateStream(c, jetstream.StreamConfig{Name: keeper.Stream, Subjects: keeper.Subjects, DenyDelete: false}); err == nil {
		t.Fatal("the gateway user changed a stream")
	}
	cancel()
	gwRefused.wait(t, "$JS.API.STREAM.UPDATE."+keeper.Stream)
	c, cancel = short()
	if _, err := gw.CreateStream(c, jetstream.StreamConfig{Name: "ROGUE", Subjects: []string{"rogue.>"}}); err == nil {
		t.Fatal("the gateway user created a stream")
	}
	cancel()
	gwRefused.wait(t, "$JS.API.STREAM.CREATE.ROGUE")
	if got := metaMsgs(); got != before {
		t.Fatalf("META holds %d messages, had %d", got, before)
	}

	// Readers: read, never publish to the ledger's subjects.
	for _, role := range []natsauth.Role{natsauth.Finance, natsauth.Analyst} {
		js, refused := connectAs(t, g, role)
		if _, err := js.Stream(ctx, keeper.Stream); err != nil {
			t.Fatalf("%s reads the budget stream: %v", role, err)
		}
		c, cancel := short()
		if _, err := js.Publish(c, "pc.exec.x.y", []byte("forged")); err == nil {
			t.Fatalf("%s published to pc.exec.x.y", role)
		}
		cancel()
		refused.wait(t, "pc.exec.x.y")
	}
	fin, finRefused := connectAs(t, g, natsauth.Finance)
	c, cancel = short()
	if _, err := fin.Stream(c, ledger.ExecutionsStream); err == nil {
		t.Fatal("finance read the executions stream")
	}
	cancel()
	finRefused.wait(t, "$JS.API.STREAM.INFO."+ledger.ExecutionsStream)
	an, _ := connectAs(t, g, natsauth.Analyst)
	if _, err := an.Stream(ctx, ledger.ExecutionsStream); err != nil {
		t.Fatalf("analyst reads executions: %v", err)
	}
	names := an.StreamNames(ctx)
	var listed []string
	for n := range names.Name() {
		listed = append(listed, n)
	}
	if names.Err() != nil || !slices.Contains(listed, "PORTCULLIS_META") {
		t.Fatalf("analyst lists streams: %v, %v", listed, names.Err())
	}
	s := ledgerStream(t, g)
	if n := streamCount(t, s); n != 0 {
		t.Fatalf("the readers' publishes landed: %d events", n)
	}
	// A reader may make a durable consumer (no subject tells it from an
	// ephemeral one), but not one that outlives a day of disuse: every
	// stream of the ledger ends idle consumers.
	for _, name := range listed {
		st, err := admin.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if !ljs.BoundsConsumers(st.CachedInfo().Config) {
			t.Fatalf("%s keeps idle consumers for good: %+v", name, st.CachedInfo().Config.ConsumerLimits)
		}
	}
	dc, err := an.CreateOrUpdateConsumer(ctx, ledger.ExecutionsStream, jetstream.ConsumerConfig{Durable: "analyst-job"})
	if err != nil {
		t.Fatalf("analyst creates a durable consumer: %v", err)
	}
	if idle := dc.CachedInfo().Config.InactiveThreshold; idle != ljs.ConsumerIdleMax {
		t.Fatalf("the analyst's durable consumer ends after %v idle, want %v", idle, ljs.ConsumerIdleMax)
	}
	c, cancel = short()
	if _, err := an.CreateOrUpdateConsumer(c, ledger.ExecutionsStream, jetstream.ConsumerConfig{Durable: "analyst-forever", InactiveThreshold: 365 * 24 * time.Hour}); err == nil {
		t.Fatal("a consumer asking for a year idle was created")
	}
	cancel()

	// Admin: everything.
	if _, err := admin.Publish(ctx, "pc.meta.admin-test", []byte("admin")); err != nil {
		t.Fatalf("admin publish: %v", err)
	}
	if _, err := admin.CreateStream(ctx, jetstream.StreamConfig{Name: "ADMIN_TEST", Subjects: []string{"admintest.>"}}); err != nil {
		t.Fatalf("admin creates a stream: %v", err)
	}
	if err := admin.DeleteStream(ctx, "ADMIN_TEST"); err != nil {
		t.Fatalf("admin deletes a stream: %v", err)
	}
}

// Operator commands pick their credentials from the data dir; without
// any, or without a ledger, they fail naming what they could not reach.
func TestCommandsNameWhatTheyCannotReach(t *testing.T) {
	dataDir, cfg, addr := t.TempDir(), writeConfig(t), freeAddr(t)
	serveProcess(t, dataDir, addr, cfg)
	url := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(dataDir, "nats.url")))))
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(binary, args...).CombinedOutput()
		if err == nil {
			t.Fatalf("%v succeeded: %s", args, out)
		}
		return string(out)
	}
	if out := run("audit", "verify", "--nats-url", url); !strings.Contains(out, "nats "+url) || !strings.Contains(out, "uthorization") {
		t.Fatalf("verify without credentials: %s", out)
	}
	if out := run("export", "--nats-url", "nats://127.0.0.1:1", "--out", filepath.Join(t.TempDir(), "x")); !strings.Contains(out, "nats nats://127.0.0.1:1") || !strings.Contains(out, "refused") {
		t.Fatalf("export from nowhere: %s", out)
	}
	bare, bareCreds := natstest.StartAuth(t) // a NATS without a ledger
	if out := run("export", "--nats-url", bare.ClientURL(), "--nats-creds", natsauth.Path(bareCreds, natsauth.Analyst), "--out", filepath.Join(t.TempDir(), "x")); !strings.Contains(out, "no ledger on nats "+bare.ClientURL()) {
		t.Fatalf("export from a NATS without a ledger: %s", out)
	}
	if out := run("budget", "verify", "--nats-url", bare.ClientURL(), "--nats-creds", natsauth.Path(dataDir, natsauth.Finance)); !strings.Contains(out, "uthorization") {
		t.Fatalf("budget verify with another server's credentials: %s", out)
	}
	empty := t.TempDir()
	if out := run("audit", "verify", "--data-dir", empty); !strings.Contains(out, "no ledger in --data-dir "+empty+": it has no jetstream directory") {
		t.Fatalf("verify on an empty dir: %s", out)
	}
	if out, err := exec.Command(binary, "audit", "verify", "--nats-url", url, "--data-dir", dataDir).CombinedOutput(); err != nil {
		t.Fatalf("verify with the data dir's credentials: %v\n%s", err, out)
	}
	// The budget commands read as finance, which cannot read executions.
	if out, err := exec.Command(binary, "budget", "verify", "--nats-url", url, "--data-dir", dataDir).CombinedOutput(); err != nil {
		t.Fatalf("budget verify as finance: %v\n%s", err, out)
	}
}
