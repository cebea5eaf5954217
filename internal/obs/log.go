// Package obs is the control plane's observability: the log handler that
// adds request, Session and Turn IDs from a context and keeps secrets out
// of log lines, and the Prometheus metrics (see docs/observability.md).
package obs

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
)

// IDs are the identifiers a log line about a request carries. A request
// gets one *IDs in its context; later stages (auth, routing) fill it in.
type IDs struct {
	Request string
	Session string
	Turn    string
}

type idsKey struct{}

// WithIDs returns ctx carrying ids, which log lines written with ctx name.
func WithIDs(ctx context.Context, ids *IDs) context.Context {
	return context.WithValue(ctx, idsKey{}, ids)
}

// IDsFrom returns the IDs ctx carries, or nil.
func IDsFrom(ctx context.Context) *IDs {
	ids, _ := ctx.Value(idsKey{}).(*IDs)
	return ids
}

// Log attribute keys for the IDs.
const (
	KeyRequestID = "request_id"
	KeySessionID = "session_id"
	KeyTurnID    = "turn_id"
)

// NewLogger returns a logger writing format ("text" or "json", "" is text)
// to w at level, through NewHandler.
func NewLogger(w io.Writer, format string, level slog.Leveler) (*slog.Logger, error) {
	o := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch format {
	case "", "text":
		h = slog.NewTextHandler(w, o)
	case "json":
		h = slog.NewJSONHandler(w, o)
	default:
		return nil, fmt.Errorf("log format %q: want text or json", format)
	}
	return slog.New(NewHandler(h)), nil
}

// NewHandler wraps h: each record gets request_id, session_id and turn_id
// from its context's IDs (when set and not already on the record), and
// every secret-looking value is redacted before h sees it.
func NewHandler(h slog.Handler) slog.Handler { return &handler{h: h} }

type handler struct{ h slog.Handler }

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = redactAttr(a)
	}
	return &handler{h: h.h.WithAttrs(out)}
}

func (h *handler) WithGroup(name string) slog.Handler { return &handler{h: h.h.WithGroup(name)} }

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	ids := IDsFrom(ctx)
	dirty := Redact(r.Message) != r.Message
	var have [3]bool
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case KeyRequestID:
			have[0] = true
		case KeySessionID:
			have[1] = true
		case KeyTurnID:
			have[2] = true
		}
		if !dirty && needsRedact(a) {
			dirty = true
		}
		return true
	})
	if dirty {
		n := slog.NewRecord(r.Time, r.Level, Redact(r.Message), r.PC)
		r.Attrs(func(a slog.Attr) bool {
			n.AddAttrs(redactAttr(a))
			return true
		})
		r = n
	}
	if ids != nil {
		if ids.Request != "" && !have[0] {
			r.AddAttrs(slog.String(KeyRequestID, ids.Request))
		}
		if ids.Session != "" && !have[1] {
			r.AddAttrs(slog.String(KeySessionID, ids.Session))
		}
		if ids.Turn != "" && !have[2] {
			r.AddAttrs(slog.String(KeyTurnID, ids.Turn))
		}
	}
	return h.h.Handle(ctx, r)
}

// secretKeys are attribute keys whose values are always redacted.
var secretKeys = []string{"password", "secret", "api_key", "apikey", "authorization", "credential", "bearer"}

func secretKey(k string) bool {
	k = strings.ToLower(k)
	for _, s := range secretKeys {
		if strings.Contains(k, s) {
			return true
		}
	}
	return k == "key" || k == "token_secret"
}

const redacted = "[redacted]"

func needsRedact(a slog.Attr) bool {
	if secretKey(a.Key) {
		return true
	}
	switch a.Value.Kind() {
	case slog.KindString:
		return suspicious(a.Value.String())
	case slog.KindGroup:
		for _, g := range a.Value.Group() {
			if needsRedact(g) {
				return true
			}
		}
	case slog.KindAny, slog.KindLogValuer:
		return suspicious(anyString(a.Value))
	}
	return false
}

func anyString(v slog.Value) string {
	v = v.Resolve()
	if v.Kind() == slog.KindString {
		return v.String()
	}
	switch x := v.Any().(type) {
	case error:
		return x.Error()
	case fmt.Stringer:
		return x.String()
	case []byte:
		return string(x)
	default:
		return fmt.Sprint(x)
	}
}

func redactAttr(a slog.Attr) slog.Attr {
	if secretKey(a.Key) {
		return slog.String(a.Key, redacted)
	}
	switch a.Value.Kind() {
	case slog.KindString:
		if s := a.Value.String(); suspicious(s) {
			return slog.String(a.Key, Redact(s))
		}
	case slog.KindGroup:
		g := a.Value.Group()
		out := make([]slog.Attr, len(g))
		for i, x := range g {
			out[i] = redactAttr(x)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}
	case slog.KindAny, slog.KindLogValuer:
		if s := anyString(a.Value); suspicious(s) {
			return slog.String(a.Key, Redact(s))
		}
	}
	return a
}

// suspicious is a cheap test for text that may hold a secret.
func suspicious(s string) bool {
	return strings.Contains(s, "hlmr_") || strings.Contains(s, "@") || strings.Contains(s, "password") || strings.Contains(s, "Bearer ")
}

var (
	// helmrSecret: API keys (hlmr_sk_), Token credentials (hlmr_tok_),
	// session credentials (hlmr_proc_) and any other hlmr_ secret.
	helmrSecret = regexp.MustCompile(`hlmr_[a-z]+_[A-Za-z0-9_\-]+`)
	// urlPassword: the password of a URL's user information.
	urlPassword = regexp.MustCompile(`(://[^:/@\s]*:)[^@\s]+@`)
	// kvPassword: password=… in a connection string.
	kvPassword = regexp.MustCompile(`(?i)(password\s*[=:]\s*)("[^"]*"|'[^']*'|\S+)`)
	bearer     = regexp.MustCompile(`(Bearer\s+)\S+`)
)

// Redact replaces the secrets in s: Helmr credentials (hlmr_…_…), URL
// passwords, password=… pairs and bearer tokens.
func Redact(s string) string {
	if !suspicious(s) {
		return s
	}
	s = helmrSecret.ReplaceAllStringFunc(s, func(m string) string {
		i := strings.Index(m[len("hlmr_"):], "_")
		return m[:len("hlmr_")+i+1] + redacted
	})
	s = urlPassword.ReplaceAllString(s, "${1}"+redacted+"@")
	s = kvPassword.ReplaceAllString(s, "${1}"+redacted)
	return bearer.ReplaceAllString(s, "${1}"+redacted)
}
