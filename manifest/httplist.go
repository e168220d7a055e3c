package manifest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// httpLister lists a streamable HTTP server's tools with requests of its
// own, in the go-sdk session's name (its session id and protocol version):
// the session's own ListTools would decode every schema into Go maps, here
// the list stays bytes, one copy per changed tool. Its replies are read as
// the stdio reader reads a line (msgReader, with the listing's bounds:
// listCall.limits, listCall.reply); everything else the server sends is
// bounded like a stdio message that is not a list (boundResponse).
type httpLister struct {
	url    string
	client *http.Client
	sess   *mcp.ClientSession
	n      atomic.Int64
}

// ownListing marks the context of a listing's HTTP request, whose reply
// may be larger than other replies.
type ownListing struct{}

func (l *httpLister) listPage(ctx context.Context, p page) listReply {
	id := fmt.Sprintf("dsh-list-%d", l.n.Add(1))
	body := []byte(`{"jsonrpc":"2.0","id":` + strconv.Quote(id) + `,"method":"tools/list","params":` + string(p.params) + `}`)
	req, err := http.NewRequestWithContext(context.WithValue(ctx, ownListing{}, true), http.MethodPost, l.url, bytes.NewReader(body))
	if err != nil {
		return listReply{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid := l.sess.ID(); sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	if res := l.sess.InitializeResult(); res != nil {
		req.Header.Set("Mcp-Protocol-Version", res.ProtocolVersion)
		if res.ProtocolVersion >= protocolWithMeta {
			req.Header.Set("Mcp-Method", "tools/list")
		}
	}
	resp, err := l.client.Do(req)
	if err != nil {
		return listReply{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return listReply{err: fmt.Errorf("it answered tools/list with HTTP status %d", resp.StatusCode)}
	}
	call := &listCall{rawID: strconv.Quote(id), page: p}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// The body is the reply, read as the stdio reader reads a line.
		m, err := newMsgReader(resp.Body).read(call.limits)
		if err != nil {
			return listReply{err: err}
		}
		return call.reply(m)
	}
	// An event stream: the reply is the event whose message has the
	// request's id; the others are read the same way, and skipped.
	events := newEventReader(resp.Body)
	rd := newMsgReader(events)
	for {
		ok, err := events.next()
		if err != nil {
			return listReply{err: err}
		}
		if !ok {
			return listReply{err: errors.New("its event stream ended without the reply to tools/list")}
		}
		m, err := eventMessage(events, rd, call.limits)
		if err != nil {
			return listReply{err: err}
		}
		if m != nil && !m.method && string(m.id) == call.rawID {
			return call.reply(m)
		}
	}
}

// message reports whether the current event carries a message for the
// client: it has data, and no name or the name "message". A name after
// the event's data is known once the data has been read.
func (e *eventReader) message() bool {
	return e.hasData && (len(e.name) == 0 || string(e.name) == "message")
}

// eventMessage reads the current event to its end, all its fields with
// it, and returns the message its data carries for the client: nil for
// an event without data, with data of nothing but whitespace (a priming
// event), or named other than "message" when it ends (its last "event:"
// line, before or after the data, as the go-sdk reads it): such an event's
// data is read with the same bounds, holding nothing past them, and
// dropped, and data that is not one message fails only an event for the
// client.
func eventMessage(e *eventReader, rd *msgReader, lim func() readLimits) (*wireMsg, error) {
	if !e.hasData {
		return nil, nil
	}
	// Read whatever the name before the data says: a later "event:" line
	// replaces it.
	rd.br.Reset(e)
	m, err := rd.read(lim)
	if err == nil {
		err = drainEvent(rd)
	}
	var bad *errMalformed
	switch {
	case errors.Is(err, io.EOF):
		// Data of nothing but whitespace: read to the event's end.
		return nil, nil
	case errors.As(err, &bad) || errors.Is(err, io.ErrUnexpectedEOF):
		if e.err != nil {
			return nil, e.err // the stream's own framing failed
		}
		// Not one message: what its name says decides, if it comes
		// within MaxServerMessageBytes more of the event.
		n, cerr := io.CopyN(io.Discard, rd.br, MaxServerMessageBytes+1)
		switch {
		case e.err != nil:
			return nil, e.err
		case cerr != nil && !errors.Is(cerr, io.EOF):
			return nil, cerr
		case n > MaxServerMessageBytes || e.message():
			return nil, err
		}
		return nil, nil
	case err != nil:
		return nil, err
	}
	if !e.message() {
		return nil, nil
	}
	return m, nil
}

// drainEvent reads what is left of an event's data after its message:
// only whitespace may be.
func drainEvent(rd *msgReader) error {
	for {
		b, err := rd.br.ReadByte()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		switch b {
		case ' ', '\t', '\n', '\r':
		default:
			return &errMalformed{"it sent an event holding more than one message"}
		}
	}
}

// boundResponse bounds what a streamable HTTP server's response carries
// to the go-sdk's session (call results, notifications, requests) as the
// stdio reader bounds a line: each message — the JSON body's, each
// event's — is measured as it streams (boundedBody) and, over a bound
// (wireMsg.overBound), never reaches the session's decoder: a reply
// becomes an error for its call, naming the bound, and the connection
// stays; anything else is dropped. A response to our own listing is left
// to httpLister, which reads it with the listing's bounds.
func boundResponse(req *http.Request, resp *http.Response) *http.Response {
	if req.Context().Value(ownListing{}) != nil {
		return resp
	}
	b := &boundedBody{body: resp.Body}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b.events = newEventReader(resp.Body)
		b.rd = newMsgReader(b.events)
	} else {
		b.rd = newMsgReader(&cappedBody{r: resp.Body, n: maxJSONBody})
	}
	resp.Body = b
	return resp
}

// boundedBody is a response body whose messages passed the bounds, or
// stand refused (boundResponse). It holds one message at a time.
type boundedBody struct {
	body   io.ReadCloser
	events *eventReader // nil: a JSON body
	rd     *msgReader
	out    []byte // what is left to hand out
	read   bool   // a JSON body's message was read
	err    error
}

func (b *boundedBody) Read(p []byte) (int, error) {
	for len(b.out) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		b.out, b.err = b.fill(b.out[:0])
	}
	n := copy(p, b.out)
	b.out = b.out[n:]
	return n, nil
}

func (b *boundedBody) Close() error { return b.body.Close() }

// fill reads the next message (of a JSON body) or event (of a stream)
// into out, as the session is to read it.
func (b *boundedBody) fill(out []byte) ([]byte, error) {
	limits := func() readLimits { return readLimits{limit: MaxServerResultBytes} }
	if b.events == nil {
		if b.read {
			return out, b.rest()
		}
		m, err := b.rd.read(limits)
		if err != nil {
			return out, err // io.EOF at the body's end
		}
		b.read = true
		msg := passed(m)
		if len(msg) > MaxServerResultBytes { // never: passed bounds it
			return out, fmt.Errorf("the MCP server's response is larger than %d bytes (MaxServerResultBytes)", MaxServerResultBytes)
		}
		return append(out, msg...), nil
	}
	ok, err := b.events.next()
	if err != nil {
		return out, err
	}
	if !ok {
		return out, io.EOF
	}
	// The event's data is read before its fields are handed on: a field
	// may follow the data (an id there still advances the session's
	// Last-Event-ID).
	e := b.events
	m, err := eventMessage(e, b.rd, limits)
	if err != nil {
		return out, err
	}
	if len(e.id) > 0 {
		out = append(append(append(out, "id: "...), e.id...), '\n')
	}
	if len(e.retry) > 0 {
		out = append(append(append(out, "retry: "...), e.retry...), '\n')
	}
	if len(e.name) > 0 {
		out = append(append(append(out, "event: "...), e.name...), '\n')
	}
	if m != nil {
		if msg := passed(m); len(msg) > 0 {
			out = append(append(append(out, "data: "...), msg...), '\n')
		}
	}
	return append(out, '\n'), nil
}

// maxJSONBodyTail bounds the whitespace a JSON body may carry after its
// message; maxJSONBody the whole body: its message (read to its end up to
// MaxServerMessageBytes, to refuse its call by id past MaxServerResultBytes),
// the whitespace around it and the tail.
const (
	maxJSONBodyTail = 4 << 10
	maxJSONBody     = MaxServerMessageBytes + 64<<10
)

// cappedBody fails a read past n bytes.
type cappedBody struct {
	r io.Reader
	n int
}

func (c *cappedBody) Read(p []byte) (int, error) {
	if c.n <= 0 {
		return 0, &errMalformed{fmt.Sprintf("it sent a JSON body larger than %d bytes (MaxServerMessageBytes and whitespace): a body carries one JSON-RPC message", maxJSONBody)}
	}
	n, err := c.r.Read(p[:min(len(p), c.n)])
	c.n -= n
	return n, err
}

// rest reads what a JSON body holds after its message: at most
// maxJSONBodyTail bytes of whitespace. A body carries one JSON-RPC
// message, which the go-sdk reads whole and decodes alone: anything more
// would be held for nothing, and a body of endless small messages would
// grow without bound.
func (b *boundedBody) rest() error {
	for n := 0; ; n++ {
		c, err := b.rd.br.ReadByte()
		if err != nil {
			return err // io.EOF at the body's end
		}
		switch {
		case c != ' ' && c != '\t' && c != '\n' && c != '\r':
			return &errMalformed{fmt.Sprintf("it sent a JSON body holding more than one message: a body carries one JSON-RPC message of at most %d bytes (MaxServerResultBytes)", MaxServerResultBytes)}
		case n >= maxJSONBodyTail:
			return &errMalformed{fmt.Sprintf("it sent a JSON body with more than %d bytes of whitespace after its message", maxJSONBodyTail)}
		}
	}
}

// passed is m as the session may read it: the message itself on one line
// (a JSON value's newlines are whitespace), or, over a bound, the error
// reply that stands for it (nothing for a request or notification).
func passed(m *wireMsg) []byte {
	if why := m.overBound(); why != "" {
		r := refusal(m, why)
		if r == nil {
			return nil
		}
		data, err := jsonrpc.EncodeMessage(r)
		if err != nil {
			return nil
		}
		return data
	}
	data := m.joined()
	for i, c := range data {
		if c == '\n' || c == '\r' {
			data[i] = ' '
		}
	}
	return data
}
