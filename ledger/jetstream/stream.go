package jetstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// MaxMsgBytes bounds one stored event (an execution record with its
// canonical action record and result body fits well below it).
const MaxMsgBytes = 1 << 20

// Stream setup waits out a cluster that has no leader yet (a gateway
// started during an election): each attempt is bounded, attempts back off
// with jitter, and the whole wait is bounded too.
const (
	SetupWaitMax      = 90 * time.Second // all attempts of one setup step
	setupAttemptWait  = 5 * time.Second  // one JetStream API request
	setupBackoffFirst = 250 * time.Millisecond
	setupBackoffMax   = 4 * time.Second
)

// StreamSpec names a stream the ledger appends to.
type StreamSpec struct {
	Name     string
	Subjects []string
	Replicas int // 1 on the embedded server, 3 on a shared cluster
	// Description is what `nats stream info` shows an operator.
	Description string
}

// Config is the stream's configuration: file storage, delete and purge
// denied (the record is append-only), direct gets for catch-up reads,
// atomic batch publish for group commit, consumers that end when idle
// (ConsumerLimits).
func (spec StreamSpec) Config() jetstream.StreamConfig {
	if spec.Replicas <= 0 {
		spec.Replicas = 1
	}
	return jetstream.StreamConfig{
		Name:               spec.Name,
		Description:        spec.Description,
		Subjects:           spec.Subjects,
		Storage:            jetstream.FileStorage,
		Retention:          jetstream.LimitsPolicy,
		Replicas:           spec.Replicas,
		DenyDelete:         true,
		DenyPurge:          true,
		AllowDirect:        true,
		AllowAtomicPublish: true,
		MaxMsgSize:         MaxMsgBytes,
		Discard:            jetstream.DiscardNew,
		Duplicates:         DuplicateWindow,
		ConsumerLimits:     ConsumerLimits(),
	}
}

// ConsumerIdleMax is how long any consumer of a ledger stream, a durable
// one included, lives without use. A reader (the analyst and finance NATS
// users) may create consumers on the streams it reads, and nothing in a
// subject tells a durable consumer from an ephemeral one, so this bound is
// what keeps readers' forgotten durable consumers from piling up in the
// server for good. The gateway's own consumers are ordered consumers
// (5 minutes idle), well below it.
const ConsumerIdleMax = 24 * time.Hour

// ConsumerLimits are the consumer limits of every ledger stream: a
// consumer that asks for no idle limit gets ConsumerIdleMax, one that asks
// for more is refused (JetStream 10192).
func ConsumerLimits() jetstream.StreamConsumerLimits {
	return jetstream.StreamConsumerLimits{InactiveThreshold: ConsumerIdleMax}
}

// BoundsConsumers reports whether a stream configured as cfg ends its
// consumers when idle for ConsumerIdleMax or less (streams made before
// that was set do not).
func BoundsConsumers(cfg jetstream.StreamConfig) bool {
	t := cfg.ConsumerLimits.InactiveThreshold
	return t > 0 && t <= ConsumerIdleMax
}

// DuplicateWindow is how long a stream remembers a message id: longer than
// AckWaitMax, so a publish resent after a silent attempt is recognised,
// and short enough that the server's id table stays small under load
// (the default is 2 minutes).
const DuplicateWindow = 30 * time.Second

// EnsureStream makes sure the stream exists with spec's configuration.
func EnsureStream(ctx context.Context, js jetstream.JetStream, spec StreamSpec) (jetstream.Stream, error) {
	return EnsureConfig(ctx, js, spec.Config(), nil)
}

// EnsureConfig returns the stream when it already has cfg's settings, and
// creates or updates it otherwise (which only the admin user may do: a
// gateway's user gets a permission error naming the stream). Transient
// answers (no leader yet, timeouts, no responders) are retried with backoff
// for up to SetupWaitMax.
func EnsureConfig(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig, lg *slog.Logger) (jetstream.Stream, error) {
	var s jetstream.Stream
	err := Retry(ctx, lg, "stream "+cfg.Name, func(ctx context.Context) error {
		cur, err := js.Stream(ctx, cfg.Name)
		if err == nil && covers(cur.CachedInfo().Config, cfg) {
			s = cur
			return nil
		}
		if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return err
		}
		s, err = js.CreateOrUpdateStream(ctx, cfg)
		if errors.Is(err, context.DeadlineExceeded) && deniedChange(js.Conn(), cfg.Name) {
			// The server refused the request for this connection's user
			// (it answers a denied publish with -ERR, not a reply): only
			// the admin user may change streams. Not transient.
			return fmt.Errorf("create or update refused (%v): only the NATS admin user may create or change streams; run `portcullis streams` with the admin credentials", nats.ErrPermissionViolation)
		}
		// Anything else, an unanswered create included, is retried: a
		// cluster that is still placing replicas answers late.
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ensure stream %s: %w", cfg.Name, err)
	}
	return s, nil
}

// deniedChange reports whether nc's last error is the server refusing it
// the create or update of stream name.
func deniedChange(nc *nats.Conn, name string) bool {
	err := nc.LastError()
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "$JS.API.STREAM.CREATE."+name) || strings.Contains(msg, "$JS.API.STREAM.UPDATE."+name)
}

// covers reports whether a stream configured as have already has every
// setting want asks for.
func covers(have, want jetstream.StreamConfig) bool {
	return slices.Equal(have.Subjects, want.Subjects) && have.Storage == want.Storage &&
		have.Retention == want.Retention && have.Replicas == want.Replicas &&
		have.DenyDelete == want.DenyDelete && have.DenyPurge == want.DenyPurge &&
		have.AllowDirect == want.AllowDirect && have.AllowAtomicPublish == want.AllowAtomicPublish &&
		(want.MaxMsgSize == 0 || have.MaxMsgSize == want.MaxMsgSize) && have.Discard == want.Discard &&
		have.DiscardNewPerSubject == want.DiscardNewPerSubject && have.MaxAge == want.MaxAge &&
		(want.Duplicates == 0 || have.Duplicates == want.Duplicates) &&
		(want.MaxMsgsPerSubject == 0 || have.MaxMsgsPerSubject == want.MaxMsgsPerSubject)
}

// Retry runs one setup step until it succeeds, fails for good, or
// SetupWaitMax passed: transient answers are retried after a jittered,
// growing backoff, and each retry is logged.
func Retry(ctx context.Context, lg *slog.Logger, what string, step func(context.Context) error) error {
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	deadline := time.Now().Add(SetupWaitMax)
	backoff := setupBackoffFirst
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, setupAttemptWait)
		err := step(actx)
		cancel()
		if err == nil || !(Transient(err) || formingCluster(err)) || ctx.Err() != nil {
			return err
		}
		if time.Now().Add(backoff).After(deadline) {
			return fmt.Errorf("%w (JetStream still unavailable after %s)", err, SetupWaitMax)
		}
		lg.Warn("JetStream not ready (no leader yet?); retrying", "what", what, "attempt", attempt, "err", err)
		wait := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
		backoff = min(backoff*2, setupBackoffMax)
	}
}

// formingCluster reports whether err is JetStream finding no peers to
// place a stream's replicas on (10005): a cluster that is still forming
// knows fewer peers than the stream asks for. On a cluster that is too
// small for good it stays, and Retry gives up after SetupWaitMax.
func formingCluster(err error) bool {
	var ae *jetstream.APIError
	return errors.As(err, &ae) && ae.ErrorCode == errCodeClusterNoPeers
}

// Transient reports whether err is an answer that may change on its own:
// the cluster has no leader yet or is catching up (JetStream 10008 / HTTP
// 503), a previous write on the subject is still replicating (10164),
// nobody answered, or the request timed out.
func Transient(err error) bool {
	var ae *jetstream.APIError
	if errors.As(err, &ae) {
		return ae.Code == 503 || ae.ErrorCode == errCodeClusterNotAvail || ae.ErrorCode == errCodeWrongLastSeqConstant ||
			ae.ErrorCode == errCodeStreamOffline
	}
	var pe *apiError
	if errors.As(err, &pe) {
		return pe.transient()
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, nats.ErrJetStreamNotEnabled)
}
