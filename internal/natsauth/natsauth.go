// Package natsauth holds the ledger's NATS users: one role per kind of
// client (gateway, finance, analyst, admin), the permissions each role gets
// on the embedded server, and the credential files (NATS nkey seeds) kept in
// a data directory. Both the server wiring and the test helpers use it, so
// tests run against the same permissions as production.
package natsauth

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// Role names a NATS user of the ledger.
type Role string

// The roles. Only admin may create, change or delete streams; the readers
// cannot publish to the ledger's subjects.
const (
	Gateway Role = "gateway" // appends to pc.>, reads every stream
	Finance Role = "finance" // reads the budget stream only
	Analyst Role = "analyst" // reads every stream
	Admin   Role = "admin"   // everything, incl. stream create/update/delete
)

// Roles lists every role, in the order their files are made.
var Roles = []Role{Gateway, Finance, Analyst, Admin}

const (
	// Dir is the folder of the credential files inside a data directory.
	Dir = "nats"
	// FileExt ends a credential file: an nkey seed, as `nats --nkey FILE`
	// and nats.NkeyOptionFromSeed read it.
	FileExt = ".nk"
	// LedgerSubjects are the subjects the ledger's streams hold.
	LedgerSubjects = "pc.>"
	// BudgetRPCPrefix + a gateway id is where that gateway serves the
	// budget commands other gateways forward to it (request/reply, no
	// stream holds them); only gateways may send or serve them.
	BudgetRPCPrefix = "pcrpc.budget."
	budgetRPC       = BudgetRPCPrefix + "*"
	// BudgetAnswerPrefix starts the reply subject of a forwarded budget
	// command: the serving gateway publishes its answer there (an explicit
	// permission of the gateway user), never into the sender's inbox.
	BudgetAnswerPrefix = "pcrpc.answer."
	budgetAnswers      = BudgetAnswerPrefix + ">"
)

// InboxPrefix is where the clients of role take their replies (JetStream
// API answers, direct gets, consumer deliveries, requests): every inbox of
// a connection of role is InboxPrefix(role) + "." + a random name, and the
// role may subscribe under its own prefix only. With one shared _INBOX.>
// any reader could subscribe to every other client's replies (finance to
// the gateway's direct gets, which carry whole execution events).
// Connections set it with Inbox.
func InboxPrefix(role Role) string { return "_INBOX." + string(role) }

// Inbox is the connection option that puts role's inboxes under
// InboxPrefix(role); every Portcullis connection as role takes it.
func Inbox(role Role) nats.Option { return nats.CustomInboxPrefix(InboxPrefix(role)) }

// inboxes is the subscribe permission of role's replies.
func inboxes(role Role) string { return InboxPrefix(role) + ".>" }

// Streams names the ledger's streams, for the readers' permissions.
type Streams struct {
	All    []string // every stream of the ledger, META included
	Budget string   // the one stream finance reads
}

// anyStream stands for every stream name in a JetStream API subject.
const anyStream = "*"

// listSubjects list the account's streams (names, infos), for the roles
// that read every stream (`nats stream ls` works with their files).
var listSubjects = []string{"$JS.API.STREAM.NAMES", "$JS.API.STREAM.LIST"}

// Path is the credential file of role in dataDir.
func Path(dataDir string, role Role) string {
	return filepath.Join(dataDir, Dir, string(role)+FileExt)
}

// readSubjects are the JetStream API subjects that read one stream: its
// info, direct and plain message gets, and ordered (ephemeral pull)
// consumers: create, fetch, info and delete (the client deletes and
// recreates one on a gap).
func readSubjects(stream string) []string {
	return []string{
		"$JS.API.STREAM.INFO." + stream,
		"$JS.API.STREAM.MSG.GET." + stream,
		"$JS.API.DIRECT.GET." + stream,
		"$JS.API.DIRECT.GET." + stream + ".>",
		"$JS.API.CONSUMER.CREATE." + stream,
		"$JS.API.CONSUMER.CREATE." + stream + ".>",
		"$JS.API.CONSUMER.MSG.NEXT." + stream + ".>",
		"$JS.API.CONSUMER.INFO." + stream + ".>",
		"$JS.API.CONSUMER.DELETE." + stream + ".>",
	}
}

// Permissions is what role may do on the ledger's account; nil (admin)
// means everything. The account holds only the ledger's streams, so the
// gateway and the analyst read any stream (a stream added later needs no
// new permission, only the admin to create it); finance reads s.Budget.
func Permissions(role Role, s Streams) *natsserver.Permissions {
	read := func(stream string) []string {
		return append([]string{"$JS.API.INFO"}, readSubjects(stream)...)
	}
	sub := &natsserver.SubjectPermission{Allow: []string{inboxes(role)}}
	switch role {
	case Gateway:
		// No allow_responses (Response): it lets a user publish once to
		// the reply subject of any message it receives, and a gateway
		// receives its own messages on pcrpc.budget.*, with any reply
		// subject it chose, $JS.API.STREAM.DELETE.<s> included. The
		// answer to a forwarded command goes to BudgetAnswerPrefix, an
		// explicit permission.
		return &natsserver.Permissions{
			Publish:   &natsserver.SubjectPermission{Allow: append([]string{LedgerSubjects, budgetRPC, budgetAnswers}, append(read(anyStream), listSubjects...)...)},
			Subscribe: &natsserver.SubjectPermission{Allow: []string{inboxes(role), budgetRPC, budgetAnswers}},
		}
	case Finance:
		return &natsserver.Permissions{Publish: &natsserver.SubjectPermission{Allow: read(s.Budget)}, Subscribe: sub}
	case Analyst:
		return &natsserver.Permissions{Publish: &natsserver.SubjectPermission{Allow: append(read(anyStream), listSubjects...)}, Subscribe: sub}
	default:
		return nil
	}
}

// EnsureFiles creates the credential file of every role missing in
// dataDir (mode 0600, written to a temporary file, fsynced, renamed into
// place, the folder fsynced) and keeps those that exist.
func EnsureFiles(dataDir string) error {
	dir := filepath.Join(dataDir, Dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("nats creds: %w", err)
	}
	made := false
	for _, r := range Roles {
		p := Path(dataDir, r)
		if _, err := os.Stat(p); err == nil {
			continue
		}
		kp, err := nkeys.CreateUser()
		if err != nil {
			return fmt.Errorf("nats creds %s: %w", r, err)
		}
		seed, err := kp.Seed()
		if err != nil {
			return fmt.Errorf("nats creds %s: %w", r, err)
		}
		if err := writeAtomic(p, append(seed, '\n')); err != nil {
			return fmt.Errorf("nats creds %s: %w", r, err)
		}
		made = true
	}
	if made {
		return syncDir(dir)
	}
	return nil
}

func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // gone after the rename
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Users are the embedded server's users: one nkey per role, read from the
// files in dataDir, each with its role's permissions.
func Users(dataDir string, s Streams) ([]*natsserver.NkeyUser, error) {
	var users []*natsserver.NkeyUser
	for _, r := range Roles {
		kp, err := readSeed(Path(dataDir, r))
		if err != nil {
			return nil, err
		}
		pub, err := kp.PublicKey()
		if err != nil {
			return nil, fmt.Errorf("nats creds %s: %w", r, err)
		}
		users = append(users, &natsserver.NkeyUser{Nkey: pub, Permissions: Permissions(r, s)})
	}
	return users, nil
}

func readSeed(path string) (nkeys.KeyPair, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("nats creds: %w", err)
	}
	kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(string(b))))
	if err != nil {
		return nil, fmt.Errorf("nats creds %s: not an nkey seed: %w", path, err)
	}
	return kp, nil
}

// ClientOption authenticates a connection with a credential file: a NATS
// user credentials file (JWT and seed, as `nsc` writes them) or an nkey
// seed file (as EnsureFiles writes them).
func ClientOption(path string) (nats.Option, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("nats creds: %w", err)
	}
	if strings.Contains(string(b), "BEGIN NATS USER JWT") {
		return nats.UserCredentials(path), nil
	}
	opt, err := nats.NkeyOptionFromSeed(path)
	if err != nil {
		return nil, fmt.Errorf("nats creds %s: %w", path, err)
	}
	return opt, nil
}

// ErrNoCreds is returned when a data directory has no credential files.
var ErrNoCreds = errors.New("no NATS credentials")

// Has reports whether dataDir holds role's credential file.
func Has(dataDir string, role Role) bool {
	_, err := os.Stat(Path(dataDir, role))
	return err == nil
}
