package helmrclient

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"
)

// maxSSELine bounds one line of an event stream; a Session event carries at
// most a few hundred KiB of Content.
const maxSSELine = 16 << 20

// sseEvent is one dispatched Server-Sent Event.
type sseEvent struct {
	// id is the last event ID in force when the event was dispatched.
	id string
	// typ is the event field ("" when absent, which means "message").
	typ string
	// data is the data lines joined with "\n".
	data string
}

// sseReader parses a text/event-stream as the WHATWG HTML standard
// describes: lines end with CRLF, LF or CR; ":" starts a comment; a blank
// line dispatches the event; data lines join with LF; a retry field sets the
// reconnection delay.
type sseReader struct {
	sc     *bufio.Scanner
	lastID string
	// retry is the reconnection delay the stream asked for, 0 when none.
	retry   time.Duration
	started bool
}

// newSSEReader reads events from r.
func newSSEReader(r io.Reader) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxSSELine)
	sc.Split(splitSSELines)
	return &sseReader{sc: sc}
}

// errSSELineTooLong reports a line over maxSSELine.
var errSSELineTooLong = errors.New("helmrclient: event stream line too long")

// next returns the next dispatched event. onLine, when non-nil, is called for
// every line read, keep-alive comments included. At the end of the stream it
// returns io.EOF; an event not terminated by a blank line is discarded, as
// the standard says.
func (r *sseReader) next(onLine func()) (sseEvent, error) {
	var (
		data    strings.Builder
		hasData bool
		typ     string
	)
	for r.sc.Scan() {
		if onLine != nil {
			onLine()
		}
		line := r.sc.Bytes()
		if !r.started {
			r.started = true
			line = bytes.TrimPrefix(line, []byte("\xEF\xBB\xBF"))
		}
		if len(line) == 0 {
			if !hasData {
				typ = ""
				continue
			}
			return sseEvent{id: r.lastID, typ: typ, data: data.String()}, nil
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.Write(value)
			hasData = true
		case "event":
			typ = string(value)
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				r.lastID = string(value)
			}
		case "retry":
			if n, err := strconv.ParseUint(string(value), 10, 31); err == nil && len(value) > 0 && value[0] != '+' {
				r.retry = time.Duration(n) * time.Millisecond
			}
		}
	}
	if err := r.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return sseEvent{}, errSSELineTooLong
		}
		return sseEvent{}, err
	}
	return sseEvent{}, io.EOF
}

// splitSSELines is a bufio.SplitFunc for lines ending in CRLF, LF or CR.
func splitSSELines(data []byte, atEOF bool) (int, []byte, error) {
	for i, b := range data {
		switch b {
		case '\n':
			return i + 1, data[:i], nil
		case '\r':
			if i+1 < len(data) {
				if data[i+1] == '\n' {
					return i + 2, data[:i], nil
				}
				return i + 1, data[:i], nil
			}
			if atEOF {
				return i + 1, data[:i], nil
			}
			// Whether an LF follows is not known yet.
			return 0, nil, nil
		}
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}
