package telemetry

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	pb "github.com/portcullis-dev/portcullis/gen/portcullis/v1"
)

// Limits of the gauges that scan the views.
const (
	// viewScanEvery is how long one scan of the views (the budget
	// accounts) answers scrapes before the next scrape scans again.
	viewScanEvery = 5 * time.Second
	// collectWaitMax bounds one scrape's reads of the streams and views.
	collectWaitMax = 5 * time.Second
)

// Decision kinds and Begin outcomes, the label values of
// portcullis_decisions_total.
const (
	KindBegin      = "begin"
	KindTransition = "transition"
	KindBudget     = "budget"

	OutcomeNew      = "new"
	OutcomeAttached = "attached"
	OutcomeRefused  = "refused"
	OutcomeFailed   = "failed"
	OutcomeAllowed  = "allowed"
	OutcomeDenied   = "denied"
)

// Metrics owns one gateway's Prometheus registry. Its methods are the hooks
// the rest of the gateway calls; all are safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry
	// accounts holds the budget accounts' gauges, which name accounts and
	// their money: served only to the callers Handler's check admits.
	accounts *prometheus.Registry

	decisions      *prometheus.CounterVec
	begin          map[string]prometheus.Counter // by outcome; read-only after NewMetrics
	appendSeconds  *prometheus.HistogramVec
	commitSeconds  *prometheus.HistogramVec
	commitMessages *prometheus.HistogramVec
	quarantined    *prometheus.CounterVec
	overdue        prometheus.Gauge
	mcpDuration    *prometheus.HistogramVec
	budgetLead     *prometheus.CounterVec
}

// NewMetrics registers every Portcullis metric, plus the Go runtime and
// process collectors, on a fresh registry.
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), accounts: prometheus.NewRegistry()}
	m.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "portcullis_decisions_total",
		Help: "Decisions this gateway made, by kind (begin, transition, budget) and outcome (begin: new, attached, refused, failed; transition: the event type; budget: allowed, denied, settled, released, limit_set).",
	}, []string{"kind", "outcome"})
	m.appendSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "portcullis_append_duration_seconds",
		Help:    "Time of one ledger append (one decision, queued and committed), by stream.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
	}, []string{"stream"})
	m.commitSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "portcullis_commit_group_duration_seconds",
		Help:    "Time from publishing one commit group (an atomic batch or a single publish) to its acknowledgement, by stream.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
	}, []string{"stream"})
	m.commitMessages = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "portcullis_commit_group_messages",
		Help:    "Messages in one commit group, by stream.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 11),
	}, []string{"stream"})
	m.quarantined = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "portcullis_quarantined_events_total",
		Help: "Events set aside instead of folded or served (bad hash, signature or chain), by stream and reason.",
	}, []string{"stream", "reason"})
	m.overdue = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "portcullis_overdue_dispatches",
		Help: "DISPATCHED executions past their deadline with no result recorded, as the last deadline sweep saw them.",
	})
	m.mcpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "mcp_server_operation_duration_seconds",
		Help:    "MCP request duration as the server saw it (OpenTelemetry semantic convention mcp.server.operation.duration).",
		Buckets: []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300},
	}, []string{"mcp_method_name", "gen_ai_tool_name", "error_type"})
	m.budgetLead = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "portcullis_budget_lead_events_total",
		Help: "Budget account leadership on this gateway, by event: lease_taken, lease_renewed, lease_lost; forward_answered, forward_no_leader (decided here instead), forward_unknown (the caller got an unknown outcome); forward_served (a command another gateway forwarded, decided here).",
	}, []string{"event"})
	m.begin = map[string]prometheus.Counter{}
	for _, o := range []string{OutcomeNew, OutcomeAttached, OutcomeRefused, OutcomeFailed} {
		m.begin[o] = m.decisions.WithLabelValues(KindBegin, o)
	}
	m.reg.MustRegister(m.decisions, m.appendSeconds, m.commitSeconds, m.commitMessages, m.quarantined, m.overdue, m.mcpDuration, m.budgetLead,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry in the Prometheus exposition formats, and
// the budget accounts' gauges too when mayReadAccounts admits the request
// (nil: to every request).
func (m *Metrics) Handler(mayReadAccounts func(*http.Request) bool) http.Handler {
	opts := promhttp.HandlerOpts{Registry: m.reg, EnableOpenMetrics: true}
	open := promhttp.HandlerFor(m.reg, opts)
	full := promhttp.HandlerFor(prometheus.Gatherers{m.reg, m.accounts}, opts)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if mayReadAccounts == nil || mayReadAccounts(r) {
			full.ServeHTTP(w, r)
			return
		}
		open.ServeHTTP(w, r)
	})
}

// Registry is where more collectors may register.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Decided counts one decision.
func (m *Metrics) Decided(kind, outcome string) { m.decisions.WithLabelValues(kind, outcome).Inc() }

// Quarantined counts one event set aside on stream for reason (the trust
// checks call it; reason is a short fixed word such as "signature").
func (m *Metrics) Quarantined(stream, reason string) {
	m.quarantined.WithLabelValues(stream, reason).Inc()
}

// SetOverdueDispatches reports what the deadline sweep last found.
func (m *Metrics) SetOverdueDispatches(n int) { m.overdue.Set(float64(n)) }

// BudgetLead returns the hook that counts budget lead events
// (keeper.OnLead); every name in events is shown from 0 on.
func (m *Metrics) BudgetLead(events []string) func(event string) {
	for _, e := range events {
		m.budgetLead.WithLabelValues(e)
	}
	return func(event string) { m.budgetLead.WithLabelValues(event).Inc() }
}

// OnCommit returns the committer hook for stream (ljs.Options.OnCommit).
func (m *Metrics) OnCommit(stream string) func(messages int, took time.Duration) {
	secs, msgs := m.commitSeconds.WithLabelValues(stream), m.commitMessages.WithLabelValues(stream)
	return func(messages int, took time.Duration) {
		secs.Observe(took.Seconds())
		msgs.Observe(float64(messages))
	}
}

// StateName is the one name of an execution state that operators see in
// metrics labels, CLI output, MCP answers and docs: the enum name without
// its STATE_ prefix, lower case ("outcome_unknown").
func StateName(s pb.State) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "STATE_"))
}

// EventName is an event type without its prefix, lower case ("dispatched").
func EventName(t pb.EventType) string {
	return strings.ToLower(strings.TrimPrefix(t.String(), "EVENT_TYPE_"))
}

// StreamLag reads one stream's last sequence and what its projector applied.
type StreamLag func(ctx context.Context) (last, applied uint64, err error)

// LedgerState is what the scraped gauges read: the streams' lag and the
// views. Any func may be nil.
type LedgerState struct {
	Streams map[string]StreamLag
	// ExecutionStates counts the executions in each state; it is read on
	// every scrape, so it must not scan (the views keep the counts).
	ExecutionStates func() map[pb.State]int64
	// Accounts lists every budget account; its gauges are served only to
	// the requests Handler's check admits.
	Accounts func(fn func(name, currency string, limit, spent, held int64)) error
	// Sources says, per stream, how its projector's events arrived.
	Sources map[string]func() SourceCounts
	// Replicas is the latest reading of every server's copy of each
	// ledger stream (nil: not read, no --nats-monitor-url).
	Replicas func() []ReplicaCount
}

// ReplicaCount is one server's copy of a ledger stream: Missing counts
// the messages it lacks (deleted or lost in a stream that denies both).
type ReplicaCount struct {
	Server, Account, Stream string
	Missing                 uint64
}

// SourceCounts is how a projector's events arrived: from its own
// gateway's committer, or read from the stream, and how often it started
// reading the stream (another gateway writes there, or an event came from
// no gateway).
type SourceCounts struct {
	Fed, Read, Reads uint64
}

// Watch registers the gauges that read the ledger at scrape time.
func (m *Metrics) Watch(s LedgerState) {
	m.reg.MustRegister(&ledgerCollector{s: s})
	if s.Accounts != nil {
		m.accounts.MustRegister(&accountCollector{read: s.Accounts})
	}
}

var (
	lagDesc = prometheus.NewDesc("portcullis_projector_lag_events",
		"Events the stream holds that its projector has not applied yet (stream last seq - applied seq).", []string{"stream"}, nil)
	streamSeqDesc = prometheus.NewDesc("portcullis_stream_last_seq",
		"The stream's last sequence.", []string{"stream"}, nil)
	executionsDesc = prometheus.NewDesc("portcullis_executions",
		"Executions in the views by current state (outcome_unknown and dispatched are the uncertain ones).", []string{"state"}, nil)
	budgetLimitDesc = prometheus.NewDesc("portcullis_budget_limit_minor",
		"An account's limit in minor units.", []string{"account", "currency"}, nil)
	budgetSpentDesc = prometheus.NewDesc("portcullis_budget_spent_minor",
		"An account's confirmed spend in minor units.", []string{"account", "currency"}, nil)
	budgetHeldDesc = prometheus.NewDesc("portcullis_budget_held_minor",
		"An account's open holds in minor units.", []string{"account", "currency"}, nil)
	projectorEventsDesc = prometheus.NewDesc("portcullis_projector_events_total",
		"Events a projector folded, by stream and source: feed (this gateway's own writes, handed over by its committer) or stream (read back from the stream: other gateways' events, messages no gateway wrote, appends whose answer was lost).", []string{"stream", "source"}, nil)
	projectorReadsDesc = prometheus.NewDesc("portcullis_projector_stream_reads_total",
		"Times a projector started reading its stream because it held events this gateway's committer did not hand over; it stops again after a quiet second. Rising steadily: another gateway writes the stream.", []string{"stream"}, nil)
	replicaMissingDesc = prometheus.NewDesc("portcullis_stream_replica_missing_messages",
		"Messages a server's copy of a ledger stream lacks (deleted or lost in a stream that denies delete and purge: its store lost them), from the servers' /jsz every minute. Above 0: remove that replica so it is rebuilt from the leader.", []string{"stream", "server", "account"}, nil)
	scrapeErrDesc = prometheus.NewDesc("portcullis_scrape_errors",
		"Reads of the ledger this scrape could not make, by source.", []string{"source"}, nil)
)

// ledgerCollector reads lag and executions by state on every scrape.
type ledgerCollector struct {
	s LedgerState
}

// accountCollector scans the budget accounts at most every viewScanEvery.
type accountCollector struct {
	read func(fn func(name, currency string, limit, spent, held int64)) error

	mu       sync.Mutex
	scanned  time.Time
	accounts []account
}

type account struct {
	name, currency     string
	limit, spent, held int64
}

func (c *ledgerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{lagDesc, streamSeqDesc, executionsDesc, projectorEventsDesc, projectorReadsDesc, replicaMissingDesc, scrapeErrDesc} {
		ch <- d
	}
}

func (c *accountCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{budgetLimitDesc, budgetSpentDesc, budgetHeldDesc, scrapeErrDesc} {
		ch <- d
	}
}

func (c *accountCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.scanned) >= viewScanEvery {
		c.scan(ch)
	}
	for _, a := range c.accounts {
		ch <- prometheus.MustNewConstMetric(budgetLimitDesc, prometheus.GaugeValue, float64(a.limit), a.name, a.currency)
		ch <- prometheus.MustNewConstMetric(budgetSpentDesc, prometheus.GaugeValue, float64(a.spent), a.name, a.currency)
		ch <- prometheus.MustNewConstMetric(budgetHeldDesc, prometheus.GaugeValue, float64(a.held), a.name, a.currency)
	}
}

func (c *ledgerCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), collectWaitMax)
	defer cancel()
	for stream, lag := range c.s.Streams {
		last, applied, err := lag(ctx)
		if err != nil {
			ch <- prometheus.MustNewConstMetric(scrapeErrDesc, prometheus.GaugeValue, 1, "stream:"+stream)
			continue
		}
		ch <- prometheus.MustNewConstMetric(streamSeqDesc, prometheus.GaugeValue, float64(last), stream)
		ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, float64(last-min(applied, last)), stream)
	}
	for stream, counts := range c.s.Sources {
		n := counts()
		ch <- prometheus.MustNewConstMetric(projectorEventsDesc, prometheus.CounterValue, float64(n.Fed), stream, "feed")
		ch <- prometheus.MustNewConstMetric(projectorEventsDesc, prometheus.CounterValue, float64(n.Read), stream, "stream")
		ch <- prometheus.MustNewConstMetric(projectorReadsDesc, prometheus.CounterValue, float64(n.Reads), stream)
	}
	if c.s.Replicas != nil {
		for _, r := range c.s.Replicas() {
			ch <- prometheus.MustNewConstMetric(replicaMissingDesc, prometheus.GaugeValue, float64(r.Missing), r.Stream, r.Server, r.Account)
		}
	}
	if c.s.ExecutionStates != nil {
		for state, n := range executionStates(c.s.ExecutionStates()) {
			ch <- prometheus.MustNewConstMetric(executionsDesc, prometheus.GaugeValue, n, state)
		}
	}
}

// executionStates is the gauge's value per state label: every state, 0
// where there is no execution in it.
func executionStates(counts map[pb.State]int64) map[string]float64 {
	states := map[string]float64{}
	for v := range pb.State_name {
		if v != int32(pb.State_STATE_UNSPECIFIED) {
			states[StateName(pb.State(v))] = 0
		}
	}
	for s, n := range counts {
		states[StateName(s)] += float64(n)
	}
	return states
}

// scan reads every account.
func (c *accountCollector) scan(ch chan<- prometheus.Metric) {
	var accounts []account
	err := c.read(func(name, currency string, limit, spent, held int64) {
		accounts = append(accounts, account{name, currency, limit, spent, held})
	})
	c.accounts = accounts
	if err != nil {
		ch <- prometheus.MustNewConstMetric(scrapeErrDesc, prometheus.GaugeValue, 1, "accounts")
		return
	}
	c.scanned = time.Now()
}

// OnBegin counts one Begin's answer (ledger.Config.OnBegin): new or
// attached by the decision, refused when the rules said no, failed when
// the ledger could not decide.
func (m *Metrics) OnBegin(decision pb.Decision, refused bool, err error) {
	switch {
	case err != nil && refused:
		m.begin[OutcomeRefused].Inc()
	case err != nil:
		m.begin[OutcomeFailed].Inc()
	case decision == pb.Decision_DECISION_ATTACHED:
		m.begin[OutcomeAttached].Inc()
	default:
		m.begin[OutcomeNew].Inc()
	}
}
