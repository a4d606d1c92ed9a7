package test

import (
	"bytes"
	"os"
	"testing"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/portcullis-dev/portcullis/internal/natsauth"
	"github.com/portcullis-dev/portcullis/server"
)

// The example nats-server.conf (README, docs/nats.md) parses, and each of
// its users may do exactly what the embedded server lets the same role do,
// on every subject a ledger client uses or an attacker would try.
func TestExampleNATSServerConfig(t *testing.T) {
	opts, err := natsserver.ProcessConfigFile("../examples/nats-server.conf")
	if err != nil {
		t.Fatal(err)
	}
	// The README shows the same file.
	conf, readme := must(os.ReadFile("../examples/nats-server.conf")), must(os.ReadFile("../README.md"))
	if !bytes.Contains(readme, append(append([]byte("```hcl\n"), conf...), "```"...)) {
		t.Fatal("README.md does not show examples/nats-server.conf as it is")
	}
	if !opts.SyncAlways || !opts.JetStream {
		t.Fatalf("example config: jetstream %v, sync always %v", opts.JetStream, opts.SyncAlways)
	}
	if opts.Cluster.Name == "" || len(opts.Routes) != 3 {
		t.Fatalf("example config: cluster %q with %d routes", opts.Cluster.Name, len(opts.Routes))
	}
	byKey := map[string]natsauth.Role{
		"UC6SA4FJUVGFXOOJJNBH4XK3FDGC3I7VP7EDICVYQ5NS6K4Z2JNDHPQS": natsauth.Gateway,
		"UA6DWDGLXEXZPQZ6NJXQVHRXSSCDVCJDJTXXPRKOL4QZ33URPTCKSIMF": natsauth.Finance,
		"UAWRVVLJQLTLBUHIEA7UUZQ4LVUNXNNC6QLCPMVLLH3K5UZRNH3BZIVR": natsauth.Analyst,
		"UDMHC7CORTVX7Z7DX5NLRH3XP6IUJQOYMX5GC2NCNNPCAKWVAC2UIMPY": natsauth.Admin,
	}
	if len(opts.Nkeys) != len(byKey) {
		t.Fatalf("example config has %d users, want %d", len(opts.Nkeys), len(byKey))
	}
	streams := server.NATSStreams()
	var probes []string
	for _, s := range streams.All {
		probes = append(probes,
			"$JS.API.STREAM.INFO."+s, "$JS.API.STREAM.MSG.GET."+s, "$JS.API.DIRECT.GET."+s, "$JS.API.DIRECT.GET."+s+".pc.exec.a.b",
			"$JS.API.CONSUMER.CREATE."+s, "$JS.API.CONSUMER.CREATE."+s+".c1.pc.budget.acme", "$JS.API.CONSUMER.MSG.NEXT."+s+".c1",
			"$JS.API.CONSUMER.INFO."+s+".c1", "$JS.API.CONSUMER.DELETE."+s+".c1",
			"$JS.API.STREAM.CREATE."+s, "$JS.API.STREAM.UPDATE."+s, "$JS.API.STREAM.DELETE."+s, "$JS.API.STREAM.PURGE."+s,
			"$JS.API.STREAM.MSG.DELETE."+s, "$JS.API.CONSUMER.DURABLE.CREATE."+s+".d1")
	}
	probes = append(probes, "$JS.API.INFO", "$JS.API.STREAM.NAMES", "$JS.API.STREAM.LIST", "$JS.API.STREAM.CREATE.ROGUE", "pc.exec.x.y", "pc.meta.gateway.g1", "pc.budget.acme", "pc.audit.checkpoint.g1", "_INBOX.abc", "_INBOX.gateway.abc.1", "_INBOX.finance.abc.1", "pcrpc.budget.gw-a", "pcrpc.answer.abc.1")
	for _, u := range opts.Nkeys {
		role, ok := byKey[u.Nkey]
		if !ok {
			t.Fatalf("unknown user %s", u.Nkey)
		}
		want := natsauth.Permissions(role, streams)
		for _, p := range probes {
			if got, exp := mayPublish(u.Permissions, p), mayPublish(want, p); got != exp {
				t.Errorf("%s publish %s: example config %v, embedded server %v", role, p, got, exp)
			}
		}
		// Each role subscribes to its own inbox prefix only (a wildcard
		// over others' inboxes is refused by the server as well).
		subs := []string{"_INBOX.x", "_INBOX.>", "pc.exec.a.b", "$JS.API.INFO", "pcrpc.budget.gw-a", "pcrpc.answer.abc.1", "pcrpc.other"}
		for _, r := range natsauth.Roles {
			subs = append(subs, natsauth.InboxPrefix(r)+".abc.1")
		}
		for _, p := range subs {
			if got, exp := maySubscribe(u.Permissions, p), maySubscribe(want, p); got != exp {
				t.Errorf("%s subscribe %s: example config %v, embedded server %v", role, p, got, exp)
			}
		}
		if got, exp := u.Permissions != nil && u.Permissions.Response != nil, want != nil && want.Response != nil; got != exp {
			t.Errorf("%s: example config allows responses %v, embedded server %v", role, got, exp)
		}
	}
}

func allowed(sp *natsserver.SubjectPermission, subject string) bool {
	if sp == nil {
		return true
	}
	ok := len(sp.Allow) == 0
	for _, f := range sp.Allow {
		ok = ok || natsserver.SubjectMatchesFilter(subject, f)
	}
	for _, f := range sp.Deny {
		ok = ok && !natsserver.SubjectMatchesFilter(subject, f)
	}
	return ok
}

func mayPublish(p *natsserver.Permissions, subject string) bool {
	return p == nil || allowed(p.Publish, subject)
}

func maySubscribe(p *natsserver.Permissions, subject string) bool {
	return p == nil || allowed(p.Subscribe, subject)
}
