package manifest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// httpLister lists a streamable HTTP server's tools with requests of its
// own, in the go-sdk session's name (its session id and protocol version):
// the session's own ListTools would decode every schema into Go maps, here
// the list stays bytes, one copy per changed tool. Its replies may be up to
// MaxServerMessageBytes; everything else the server sends is bounded by
// MaxServerResultBytes (see httpClient).
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
	var data []byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		data, err = sseReply(resp.Body, strconv.Quote(id))
	} else {
		data, err = io.ReadAll(resp.Body)
	}
	if err != nil {
		return listReply{err: err}
	}
	if len(data) > p.budget {
		return listReply{err: fmt.Errorf("its tool list is larger than %d bytes (MaxServerListBytes)", MaxServerListBytes)}
	}
	return httpListReply(data, p)
}

// httpListReply is the page a listing's reply over HTTP carries.
func httpListReply(data []byte, p page) listReply {
	r := listReply{bytes: len(data)}
	if !json.Valid(data) {
		r.err = errors.New("it answered tools/list with a reply that is not JSON")
		return r
	}
	var result, rpcErr []byte
	_, _ = eachMember(data, func(k, v []byte) error {
		switch string(k) {
		case "result":
			result = v
		case "error":
			rpcErr = v
		}
		return nil
	})
	if rpcErr != nil {
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(rpcErr, &e)
		r.err = fmt.Errorf("it answered tools/list with an error: %s", capMessage(e.Message))
		return r
	}
	if r.err = listResult(result, &r); r.err != nil {
		return r
	}
	call := &listCall{page: p}
	_, _ = eachMember(result, func(k, v []byte) error {
		if string(k) == "tools" {
			_, _ = eachElement(v, func(tool []byte) error {
				call.keep(tool)
				return nil
			})
		}
		return nil
	})
	r.tools, r.err = call.tools, call.err
	return r
}

// sseReply reads an event stream until the event that carries the reply
// with the raw id rawID, and returns its data. Events are bounded by
// MaxServerMessageBytes; the others are skipped.
func sseReply(body io.Reader, rawID string) ([]byte, error) {
	br := bufio.NewReaderSize(body, 64<<10)
	var data, line []byte
	name := ""
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line[:0], chunk...)
		for errors.Is(err, bufio.ErrBufferFull) {
			if len(line) > MaxServerMessageBytes {
				return nil, fmt.Errorf("it sent an event larger than %d bytes (MaxServerMessageBytes)", MaxServerMessageBytes)
			}
			chunk, err = br.ReadSlice('\n')
			line = append(line, chunk...)
		}
		if err != nil && len(line) == 0 {
			if errors.Is(err, io.EOF) {
				return nil, errors.New("its event stream ended without the reply to tools/list")
			}
			return nil, err
		}
		text := bytes.TrimRight(line, "\r\n")
		switch {
		case len(text) == 0: // the end of an event
			if len(data) > 0 && (name == "" || name == "message") && replyTo(data, rawID) {
				return data, nil
			}
			data, name = data[:0], ""
		case bytes.HasPrefix(text, []byte("data:")):
			v := bytes.TrimPrefix(text[len("data:"):], []byte(" "))
			if len(data) > 0 {
				data = append(data, '\n')
			}
			if len(data)+len(v) > MaxServerMessageBytes {
				return nil, fmt.Errorf("it sent an event larger than %d bytes (MaxServerMessageBytes)", MaxServerMessageBytes)
			}
			data = append(data, v...)
		case bytes.HasPrefix(text, []byte("event:")):
			name = string(bytes.TrimSpace(text[len("event:"):]))
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				line = line[:0]
				continue // the last line; the next read ends the stream
			}
			return nil, err
		}
	}
}

// replyTo reports whether the JSON-RPC message data is a reply with the
// raw id rawID.
func replyTo(data []byte, rawID string) bool {
	if !json.Valid(data) {
		return false
	}
	found := false
	_, _ = eachMember(data, func(k, v []byte) error {
		if string(k) == "id" && string(v) == rawID {
			found = true
		}
		return nil
	})
	return found
}
