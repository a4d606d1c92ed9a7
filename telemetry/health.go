package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
)

// Limits of readiness.
const (
	// DefaultStuckAfter is how long a projector may stay behind its stream
	// without applying anything before the gateway reports not ready.
	DefaultStuckAfter = 30 * time.Second
	// readyWaitMax bounds one readiness check's reads of NATS.
	readyWaitMax = 2 * time.Second
)

// Readiness answers whether a gateway can decide: NATS reachable and no
// projector stuck. It serves /readyz and grpc.health.v1 (Checker); /healthz
// (Live) only says the process answers.
type Readiness struct {
	// Connected reports an error while NATS is unreachable.
	Connected func() error
	// Streams read each stream's lag (the same funcs the metrics use).
	Streams map[string]StreamLag
	// StuckAfter: 0 picks DefaultStuckAfter.
	StuckAfter time.Duration
	// Services are the gRPC service names the health checker knows.
	Services []string
	Now      func() time.Time // nil: time.Now

	mu   sync.Mutex
	best map[string]lagMark // per stream, while behind: the last progress seen
}

// lagMark is when a projector that is behind last applied more events.
type lagMark struct {
	applied uint64
	at      time.Time
}

// Problem is nil when the gateway is ready, else the reasons it is not.
func (r *Readiness) Problem(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyWaitMax)
	defer cancel()
	if r.Connected != nil {
		if err := r.Connected(); err != nil {
			return fmt.Errorf("nats: %w", err)
		}
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	stuckAfter := r.StuckAfter
	if stuckAfter <= 0 {
		stuckAfter = DefaultStuckAfter
	}
	names := make([]string, 0, len(r.Streams))
	for s := range r.Streams {
		names = append(names, s)
	}
	sort.Strings(names)
	var errs []error
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.best == nil {
		r.best = map[string]lagMark{}
	}
	for _, stream := range names {
		last, applied, err := r.Streams[stream](ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("nats: read stream %s: %w", stream, err))
			continue
		}
		lag := last - min(applied, last)
		t := now()
		b, seen := r.best[stream]
		switch {
		case lag == 0:
			delete(r.best, stream)
		case !seen || applied > b.applied:
			r.best[stream] = lagMark{applied: applied, at: t}
		case t.Sub(b.at) >= stuckAfter:
			errs = append(errs, fmt.Errorf("projector %s stuck: %d events behind, nothing applied for %s", stream, lag, t.Sub(b.at).Round(time.Second)))
		}
	}
	return errors.Join(errs...)
}

// Ready serves /readyz: 200 "ready", else 503 with the reasons.
func (r *Readiness) Ready() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if err := r.Problem(req.Context()); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: %v\n", err)
			return
		}
		fmt.Fprintln(w, "ready")
	})
}

// Live serves /healthz: the process is up and answering.
func Live() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		fmt.Fprintln(w, "ok")
	})
}

var _ grpchealth.Checker = (*Readiness)(nil)

// Check is grpc.health.v1's answer: SERVING only when ready, for the
// whole server ("") and every known service.
func (r *Readiness) Check(ctx context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	known := req.Service == ""
	for _, s := range r.Services {
		known = known || s == req.Service
	}
	if !known {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("unknown service %q", req.Service))
	}
	if r.Problem(ctx) != nil {
		return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
	}
	return &grpchealth.CheckResponse{Status: grpchealth.StatusServing}, nil
}
