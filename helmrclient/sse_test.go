package helmrclient

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// readAll parses every event of stream.
func readAll(t testing.TB, r io.Reader) ([]sseEvent, *sseReader) {
	t.Helper()
	sr := newSSEReader(r)
	var out []sseEvent
	for {
		ev, err := sr.next(nil)
		if errors.Is(err, io.EOF) {
			return out, sr
		}
		if err != nil {
			t.Fatalf("next: %v", err)
		}
		out = append(out, ev)
	}
}

func TestSSEReader(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		want  []sseEvent
		retry time.Duration
	}{
		{
			name: "frames with id and data",
			in:   "id: 1\ndata: {\"sequence\":1}\n\nid: 2\ndata: {\"sequence\":2}\n\n",
			want: []sseEvent{{id: "1", data: `{"sequence":1}`}, {id: "2", data: `{"sequence":2}`}},
		},
		{
			name: "keep-alive comments are skipped",
			in:   ": ping\n\n: ping\nid: 7\n: inside\ndata: x\n\n: ping\n\n",
			want: []sseEvent{{id: "7", data: "x"}},
		},
		{
			name: "CRLF and CR line ends",
			in:   "id: 1\r\ndata: a\r\n\r\nid: 2\rdata: b\r\rdata: c\n\n",
			want: []sseEvent{{id: "1", data: "a"}, {id: "2", data: "b"}, {id: "2", data: "c"}},
		},
		{
			name: "data lines join with LF and only one leading space is stripped",
			in:   "data:one\ndata:  two\ndata\n\n",
			want: []sseEvent{{data: "one\n two\n"}},
		},
		{
			name: "event type, and a blank event resets it",
			in:   "event: error\n\ndata: a\n\nevent: error\ndata: b\n\n",
			want: []sseEvent{{data: "a"}, {typ: "error", data: "b"}},
		},
		{
			name:  "retry field",
			in:    "retry: 1500\ndata: a\n\nretry: x\n\n",
			want:  []sseEvent{{data: "a"}},
			retry: 1500 * time.Millisecond,
		},
		{
			name: "byte order mark at the start",
			in:   "\xEF\xBB\xBFid: 3\ndata: a\n\n",
			want: []sseEvent{{id: "3", data: "a"}},
		},
		{
			name: "an unterminated event at the end is discarded",
			in:   "id: 1\ndata: a\n\nid: 2\ndata: b\n",
			want: []sseEvent{{id: "1", data: "a"}},
		},
		{
			name: "id with NUL is ignored",
			in:   "id: 4\n\nid: 5\x006\ndata: a\n\n",
			want: []sseEvent{{id: "4", data: "a"}},
		},
		{
			name: "unknown fields are ignored",
			in:   "foo: bar\ndata: a\n\n",
			want: []sseEvent{{data: "a"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, mode := range []string{"whole", "one byte at a time"} {
				var r io.Reader = strings.NewReader(tc.in)
				if mode != "whole" {
					r = iotest.OneByteReader(r)
				}
				got, sr := readAll(t, r)
				if !equalEvents(got, tc.want) {
					t.Errorf("%s: events = %+v; want %+v", mode, got, tc.want)
				}
				if sr.retry != tc.retry {
					t.Errorf("%s: retry = %v; want %v", mode, sr.retry, tc.retry)
				}
			}
		})
	}
}

func equalEvents(a, b []sseEvent) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSSEReaderLineTooLong(t *testing.T) {
	long := "data: " + strings.Repeat("x", maxSSELine+1) + "\n\n"
	sr := newSSEReader(strings.NewReader(long))
	if _, err := sr.next(nil); !errors.Is(err, errSSELineTooLong) {
		t.Fatalf("next = %v; want errSSELineTooLong", err)
	}
}

func TestSSEReaderOnLine(t *testing.T) {
	sr := newSSEReader(strings.NewReader(": ping\n: ping\ndata: a\n\n"))
	lines := 0
	if _, err := sr.next(func() { lines++ }); err != nil {
		t.Fatal(err)
	}
	if lines != 4 {
		t.Errorf("onLine called %d times; want 4", lines)
	}
}

// FuzzSSEReader checks that the parser never panics and that how the bytes
// arrive (whole or one at a time) does not change the events.
func FuzzSSEReader(f *testing.F) {
	f.Add("id: 1\ndata: {}\n\n")
	f.Add(": ping\r\n\r\ndata: a\rdata: b\r\r")
	f.Add("retry: 10\nevent: x\ndata\n\n\xEF\xBB\xBF")
	f.Fuzz(func(t *testing.T, in string) {
		whole, sr1 := readAll(t, strings.NewReader(in))
		bytewise, sr2 := readAll(t, iotest.OneByteReader(strings.NewReader(in)))
		if !equalEvents(whole, bytewise) {
			t.Fatalf("whole %+v != bytewise %+v", whole, bytewise)
		}
		if sr1.retry != sr2.retry || sr1.lastID != sr2.lastID {
			t.Fatalf("state differs: %v/%q vs %v/%q", sr1.retry, sr1.lastID, sr2.retry, sr2.lastID)
		}
	})
}
