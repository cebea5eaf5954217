-- A Turn's trace context: the W3C traceparent of the span that admitted
-- it, empty when tracing was off (docs/observability.md).

ALTER TABLE turns ADD COLUMN trace_parent TEXT NOT NULL DEFAULT '';
