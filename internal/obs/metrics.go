package obs

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the control plane's Prometheus metrics, on a registry of
// their own (no global state). Every label is bounded: Agent IDs, statuses,
// error codes, route patterns, node IDs, never a Session or Turn ID.
type Metrics struct {
	reg *prometheus.Registry

	// TurnsAdmitted counts Turns admitted (queued), by agent.
	TurnsAdmitted *prometheus.CounterVec
	// TurnsSettled counts Turns that reached a terminal status, by agent,
	// status and error code ("" when completed).
	TurnsSettled *prometheus.CounterVec
	// TurnQueueWait observes admission to start, by agent.
	TurnQueueWait *prometheus.HistogramVec
	// TurnRunTime observes start to settlement, by agent and status.
	TurnRunTime *prometheus.HistogramVec
	// TurnLatency observes admission to settlement, by agent and status.
	TurnLatency *prometheus.HistogramVec
	// StoreTx observes store transactions, by kind (update, view, read).
	StoreTx *prometheus.HistogramVec
	// HTTPRequests observes API requests, by route pattern and status.
	HTTPRequests *prometheus.HistogramVec
	// SSESubscribers is the number of open event streams.
	SSESubscribers prometheus.Gauge
	// ProcessesStarted and ProcessesFailed count session processes that
	// started, and that failed to start or exited unexpectedly.
	ProcessesStarted prometheus.Counter
	ProcessesFailed  prometheus.Counter
}

// turnBuckets suit Turns: from milliseconds to an hour.
var turnBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}

// NewMetrics returns the metrics on a new registry, with the Go runtime's
// and the process's collectors.
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.TurnsAdmitted = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "helmr_turns_admitted_total",
		Help: "Turns admitted to a Session's queue."}, []string{"agent"})
	m.TurnsSettled = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "helmr_turns_settled_total",
		Help: "Turns settled, by terminal status and error code (empty when completed)."}, []string{"agent", "status", "error_code"})
	m.TurnQueueWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "helmr_turn_queue_wait_seconds",
		Help: "Time from a Turn's admission to its start.", Buckets: turnBuckets}, []string{"agent"})
	m.TurnRunTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "helmr_turn_run_seconds",
		Help: "Time from a Turn's start to its settlement.", Buckets: turnBuckets}, []string{"agent", "status"})
	m.TurnLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "helmr_turn_latency_seconds",
		Help: "Time from a Turn's admission to its settlement.", Buckets: turnBuckets}, []string{"agent", "status"})
	m.StoreTx = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "helmr_store_transaction_seconds",
		Help:    "Store transactions, from the call to its return (commit included).",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5}}, []string{"kind"})
	m.HTTPRequests = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "helmr_http_request_duration_seconds",
		Help:    "API requests by route pattern and HTTP status.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5, 30, 60}}, []string{"route", "status"})
	m.SSESubscribers = prometheus.NewGauge(prometheus.GaugeOpts{Name: "helmr_sse_subscribers", Help: "Open Session event streams."})
	m.ProcessesStarted = prometheus.NewCounter(prometheus.CounterOpts{Name: "helmr_session_processes_started_total",
		Help: "Session processes started on this node."})
	m.ProcessesFailed = prometheus.NewCounter(prometheus.CounterOpts{Name: "helmr_session_processes_failed_total",
		Help: "Session processes that could not start or exited unexpectedly on this node."})
	m.reg.MustRegister(m.TurnsAdmitted, m.TurnsSettled, m.TurnQueueWait, m.TurnRunTime, m.TurnLatency, m.StoreTx,
		m.HTTPRequests, m.SSESubscribers, m.ProcessesStarted, m.ProcessesFailed,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Register adds a collector, such as a StateCollector, to the registry.
func (m *Metrics) Register(c prometheus.Collector) error { return m.reg.Register(c) }

// Gatherer is the registry, for tests and exporters.
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.reg }

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// State is what a scrape reads from the store and the supervisor: counts
// by label value.
type State struct {
	SessionsByStatus map[string]int64
	HoldsByKind      map[string]int64
	ComputersByRes   map[string]int64
	CommandsByStatus map[string]int64
	PendingQuestions int64
	PendingTokens    int64
	LeasesByNode     map[string]int64
	ProcessesRunning int64
	ProcessesFrozen  int64
	// SessionsParked counts Sessions whose process this node parked
	// (checkpointed to disk: no process, no memory).
	SessionsParked int64
}

// StateCollector computes its gauges at scrape time with read (bounded by
// a timeout), so that they are right across restarts and nodes.
type StateCollector struct {
	read    func(ctx context.Context) (State, error)
	timeout time.Duration
	descs   map[string]*prometheus.Desc
}

// NewStateCollector returns a collector of the gauges read returns.
func NewStateCollector(read func(ctx context.Context) (State, error)) *StateCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &StateCollector{read: read, timeout: 5 * time.Second, descs: map[string]*prometheus.Desc{
		"sessions":  d("helmr_sessions", "Sessions by status.", "status"),
		"holds":     d("helmr_holds", "Active holds on Sessions, by kind.", "kind"),
		"computers": d("helmr_computers", "Live Computers by residency.", "residency"),
		"commands":  d("helmr_commands", "Commands by status.", "status"),
		"questions": d("helmr_questions_pending", "Questions (asks) waiting for an answer."),
		"tokens":    d("helmr_tokens_pending", "Tokens waiting for completion."),
		"leases":    d("helmr_leases", "Session leases held, by node.", "node"),
		"running":   d("helmr_session_processes_running", "Session processes this node supervises that are not frozen."),
		"frozen":    d("helmr_session_processes_frozen", "Session processes this node has frozen in memory (where checkpoints are off)."),
		"parked":    d("helmr_sessions_parked", "Sessions whose process this node parked: checkpointed to disk, no process, no memory."),
		"up":        d("helmr_state_scrape_ok", "1 when the scrape read the store, 0 when it failed."),
	}}
}

// Describe implements prometheus.Collector.
func (c *StateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *StateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	st, err := c.read(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.descs["up"], prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.descs["up"], prometheus.GaugeValue, 1)
	for name, m := range map[string]map[string]int64{"sessions": st.SessionsByStatus, "holds": st.HoldsByKind,
		"computers": st.ComputersByRes, "commands": st.CommandsByStatus, "leases": st.LeasesByNode} {
		for l, n := range m {
			ch <- prometheus.MustNewConstMetric(c.descs[name], prometheus.GaugeValue, float64(n), l)
		}
	}
	ch <- prometheus.MustNewConstMetric(c.descs["questions"], prometheus.GaugeValue, float64(st.PendingQuestions))
	ch <- prometheus.MustNewConstMetric(c.descs["tokens"], prometheus.GaugeValue, float64(st.PendingTokens))
	ch <- prometheus.MustNewConstMetric(c.descs["running"], prometheus.GaugeValue, float64(st.ProcessesRunning))
	ch <- prometheus.MustNewConstMetric(c.descs["frozen"], prometheus.GaugeValue, float64(st.ProcessesFrozen))
	ch <- prometheus.MustNewConstMetric(c.descs["parked"], prometheus.GaugeValue, float64(st.SessionsParked))
}
