// Package engine is the one place where Sessions, Turns, messages and
// deployments change state. Every transition is one store transaction that
// updates rows and appends the Session's events; after it commits, the
// engine wakes watchers (event streams, waiters) and the supervisor.
package engine

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/obs"
	"github.com/helmr-go/helmr/internal/store"
)

// Clock tells the time; tests inject their own.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// SystemClock is the wall clock.
var SystemClock Clock = systemClock{}

// Notifier is told about committed changes that need action: a Session has
// runnable work, a message to deliver, or a Turn to interrupt.
type Notifier interface {
	SessionWork(sessionID string)
	TurnMessage(sessionID, turnID string)
	TurnInterrupt(sessionID, turnID string)
	// Reserve is asked before a Turn is admitted. A non-nil Reservation
	// means the Session's process is ready and idle: the admitting
	// transaction starts the Turn at once and reports it to Started.
	Reserve(sessionID string) Reservation
}

// Reservation holds a ready, idle session process for a Turn being admitted.
type Reservation interface {
	// Started is called once with the Turn the transaction started (nil
	// when none, or when the transaction failed).
	Started(t *store.Turn, msgs []store.Message)
}

type nopNotifier struct{}

func (nopNotifier) Reserve(string) Reservation { return nil }

func (nopNotifier) SessionWork(string)           {}
func (nopNotifier) TurnMessage(string, string)   {}
func (nopNotifier) TurnInterrupt(string, string) {}

// Options configure New.
type Options struct {
	Clock  Clock
	Logger *slog.Logger
	// PublicURL is the base URL clients reach the API at, used in Token
	// callback URLs (for example "https://helmr.example.com").
	PublicURL string
	// NodeID names this control-plane node among several sharing one
	// database; "" for a single node.
	NodeID string
	// Metrics receive the engine's counts and timings; nil makes a set
	// of its own that nothing exports.
	Metrics *obs.Metrics
	// TurnLogger logs one line per Turn transition (at info); nil uses
	// Logger.
	TurnLogger *slog.Logger
	// Tracer traces Turns (docs/observability.md); nil is off.
	Tracer *obs.Tracer
}

// Engine applies state transitions to the store.
type Engine struct {
	store store.Store
	clock Clock
	log   *slog.Logger
	// tlog logs Turn transitions; metrics count them (observe.go).
	tlog    *slog.Logger
	metrics *obs.Metrics
	tracer  *obs.Tracer
	agents  agentCache
	hub     hub[struct{}]             // by Session ID
	turns   hub[*helmrtype.TurnState] // by Turn ID, on settlement
	// memory: the Turns admitted or settled here lately, for waiters.
	memory *turnMemory

	mu sync.RWMutex
	// limitsOff: see SetLimitsOff; checkpointOff: see SetCheckpointOff.
	limitsOff, checkpointOff string
	notifier                 Notifier
	runner                   CommandRunner

	sched sched
	// schedMu guards armed, the Schedules with a timer.
	schedMu sync.Mutex
	armed   map[string]bool
	// pressure is set while the store's disk is below its floor.
	pressure atomic.Bool
	// publicURL is the base of Token callback URLs.
	publicURL string
	// node is this node's ID among several (Options.NodeID), incarnation
	// this process's run of it, and beat whether it has renewed once.
	node        string
	incarnation string
	beat        atomic.Bool

	// idle tracks the implicit Computers seen unused (ReapIdleComputers).
	idle idleComputers

	keys sync.Map // API key hash → *store.APIKey (a single node's cache)
	// keysMu guards keysGen, which each revocation increments: a key read
	// before a revocation is not cached after it.
	keysMu  sync.Mutex
	keysGen uint64
	parents sync.Map // Session ID → parent Session ID (immutable)
	deps    sync.Map // deployment ID → *deployment (immutable)
}

// New returns an engine over s.
func New(s store.Store, opts Options) *Engine {
	if opts.Clock == nil {
		opts.Clock = SystemClock
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics == nil {
		opts.Metrics = obs.NewMetrics()
	}
	if opts.TurnLogger == nil {
		opts.TurnLogger = opts.Logger
	}
	e := &Engine{clock: opts.Clock, log: opts.Logger, tlog: opts.TurnLogger, metrics: opts.Metrics, tracer: opts.Tracer, notifier: nopNotifier{}, hub: newHub[struct{}](),
		turns: newHub[*helmrtype.TurnState](), memory: newTurnMemory(), sched: sched{clock: opts.Clock}, publicURL: strings.TrimRight(opts.PublicURL, "/"), node: opts.NodeID,
		incarnation: NewID()}
	e.store = newObsStore(s, e)
	return e
}

// SetPublicURL sets the base of Token callback URLs, when it is known only
// after the listener is open.
func (e *Engine) SetPublicURL(u string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.publicURL = strings.TrimRight(u, "/")
}

// Close stops the engine's timers.
func (e *Engine) Close() { e.sched.stop() }

// SetNotifier sets who is told about runnable work; the supervisor.
func (e *Engine) SetNotifier(n Notifier) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.notifier = n
}

func (e *Engine) notify() Notifier {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.notifier
}

// Tracer returns the engine's Tracer (nil when tracing is off).
func (e *Engine) Tracer() *obs.Tracer { return e.tracer }

// Store returns the engine's store.
func (e *Engine) Store() store.Store { return e.store }

// Now is the engine clock's time, truncated to microseconds as stored.
func (e *Engine) Now() time.Time { return e.clock.Now().UTC().Truncate(time.Microsecond) }

// Watch returns a channel that is closed at the next committed change of
// the Session's timeline or state, and stop, which the caller calls when it
// no longer waits.
func (e *Engine) Watch(sessionID string) (changed <-chan struct{}, stop func()) {
	sg := e.hub.watch(sessionID)
	return sg.ch, func() { e.hub.unwatch(sessionID, sg) }
}

// Watchers is how many Sessions and Turns are being watched (for tests and
// diagnostics).
func (e *Engine) Watchers() int { return e.hub.size() + e.turns.size() }

// wake wakes the Session's watchers.
func (e *Engine) wake(sessionID string) { e.hub.wake(sessionID, struct{}{}) }

// NewID returns a new UUIDv7.
func NewID() string { return uuid.Must(uuid.NewV7()).String() }

func notFound(what, id string) error {
	return &helmrtype.Error{Code: helmrtype.CodeNotFound, Message: what + " " + id + " not found", Details: map[string]any{"id": id}}
}

func invalid(format string, args ...any) error {
	return helmrtype.Errorf(helmrtype.CodeInvalidRequest, format, args...)
}

// hub wakes watchers of an ID once, handing them a value: sessions wake on
// any change of their timeline or state, Turns on their settlement (with
// the settled state, so a waiter needs no read). Entries are counted, so a
// watcher that gives up removes what it added.
type hub[V any] struct {
	mu sync.Mutex
	m  map[string]*signal[V]
}

// signal is closed once, after val is set.
type signal[V any] struct {
	ch  chan struct{}
	val V
	n   int // watchers
}

func newHub[V any]() hub[V] { return hub[V]{m: map[string]*signal[V]{}} }

func (h *hub[V]) watch(id string) *signal[V] {
	h.mu.Lock()
	defer h.mu.Unlock()
	sg, ok := h.m[id]
	if !ok {
		sg = &signal[V]{ch: make(chan struct{})}
		h.m[id] = sg
	}
	sg.n++
	return sg
}

// unwatch drops one watcher of sg; the last one removes the entry.
func (h *hub[V]) unwatch(id string, sg *signal[V]) {
	h.mu.Lock()
	defer h.mu.Unlock()
	sg.n--
	if sg.n <= 0 && h.m[id] == sg {
		delete(h.m, id)
	}
}

func (h *hub[V]) wake(id string, v V) {
	h.mu.Lock()
	sg, ok := h.m[id]
	delete(h.m, id)
	h.mu.Unlock()
	if ok {
		sg.val = v
		close(sg.ch)
	}
}

// watched reports whether id has watchers.
func (h *hub[V]) watched(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.m[id]
	return ok
}

// keys returns the watched IDs.
func (h *hub[V]) keys() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.m))
	for k := range h.m {
		out = append(out, k)
	}
	return out
}

func (h *hub[V]) size() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.m)
}

// appendEvent adds one event to the Session's timeline inside tx.
func (e *Engine) appendEvent(ctx context.Context, tx store.Tx, sessionID, turnID, kind string, data any, now time.Time) (int64, error) {
	var raw json.RawMessage
	switch d := data.(type) {
	case nil:
		raw = json.RawMessage("{}")
	case json.RawMessage:
		raw = d
	default:
		b, err := json.Marshal(d)
		if err != nil {
			return 0, err
		}
		raw = b
	}
	ev := &store.Event{SessionID: sessionID, TurnID: turnID, Kind: kind, Data: raw, CreatedAt: now}
	if err := tx.AppendEvent(ctx, ev); err != nil {
		return 0, err
	}
	return ev.Sequence, nil
}

// digest is the canonical digest of a request for idempotency checks.
func digest(v any) string {
	b, _ := json.Marshal(v)
	var anyv any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // numbers keep their digits: 2^53+1 differs from 2^53
	if dec.Decode(&anyv) == nil {
		b, _ = json.Marshal(anyv) // maps marshal with sorted keys: canonical
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// idempotent runs do once per (scope, key): a replay with the same request
// returns the stored receipt into out; another request is a conflict.
func idempotent[T any](ctx context.Context, tx store.Tx, now time.Time, scope, key string, req any, do func() (T, error)) (T, bool, error) {
	var zero T
	if key == "" {
		v, err := do()
		return v, false, err
	}
	if len(key) > 256 {
		return zero, false, invalid("idempotency_key is longer than 256 bytes")
	}
	d := digest(req)
	prev, err := tx.GetIdempotency(ctx, scope, key)
	switch {
	case err == nil:
		if prev.Digest != d {
			return zero, false, &helmrtype.Error{Code: helmrtype.CodeIdempotencyConflict,
				Message: "idempotency_key " + key + " was used with a different request"}
		}
		var out T
		if err := json.Unmarshal(prev.Response, &out); err != nil {
			return zero, false, err
		}
		return out, true, nil
	case !errors.Is(err, store.ErrNotFound):
		return zero, false, err
	}
	v, err := do()
	if err != nil {
		return zero, false, err
	}
	resp, err := json.Marshal(v)
	if err != nil {
		return zero, false, err
	}
	if err := tx.InsertIdempotency(ctx, &store.Idempotency{Scope: scope, Key: key, Digest: d, Response: resp, CreatedAt: now}); err != nil {
		return zero, false, err
	}
	return v, false, nil
}

// NewSecret returns a random credential with the given prefix and its hash.
func NewSecret(prefix string) (secret, hash string) {
	b := make([]byte, 24)
	rand.Read(b)
	secret = prefix + hex.EncodeToString(b)
	return secret, HashSecret(secret)
}

// HashSecret is the stored hash of a credential.
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}
