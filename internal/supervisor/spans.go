package supervisor

import (
	"github.com/helmr-go/helmr/internal/obs"
	"github.com/helmr-go/helmr/internal/protocol"
)

// importSpans exports the spans a process shipped for its running Turn, in
// that Turn's trace, up to obs.MaxSpansPerTurn a Turn. Spans for another
// Turn, or for one that is not traced, are dropped: they are telemetry,
// never a reason to fail the Turn.
func (s *Supervisor) importSpans(p *proc, m *protocol.Msg) {
	tr := s.eng.Tracer()
	p.mu.Lock()
	traceParent, room := p.trace, obs.MaxSpansPerTurn-p.spans
	if p.running != m.TurnID || traceParent == "" || !tr.Enabled() || room <= 0 {
		p.mu.Unlock()
		return
	}
	spans := m.Spans[:min(len(m.Spans), room, obs.MaxSpansPerMessage)]
	p.spans += len(spans)
	p.mu.Unlock()
	tr.ImportSpans(traceParent, m.TurnID, spans)
}
