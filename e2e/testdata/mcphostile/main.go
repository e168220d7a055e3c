// Command mcphostile is a hostile stdio MCP server for the e2e tests of
// what an upstream can make `dsh-container mcp` hold and leave behind
// (issue 24 §7). It speaks JSON-RPC itself, line by line, so that it can
// send what a well-behaved SDK never would: a list of ~16 MiB in one
// page, schema bombs, a result larger than any bound, a line longer than
// any message.
//
// It starts with three tools, below; when the file named by -trigger
// appears it switches to its -list (and says so with
// notifications/tools/list_changed), and with -change-for it keeps
// changing every tool of that list and saying so, every 100 ms, for that
// long. Tools:
//
//   - spawn: starts a grandchild (this binary with -sleeper MARKER) that
//     leaves the process group (setsid), ignores SIGHUP and SIGTERM and
//     sleeps; answers "started".
//   - big {"bytes": N}: a text result of N bytes, in one line.
//   - line {"bytes": N}: a line of N bytes with no newline until the end
//     (a JSON string that never closes in time).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

var (
	listKind  = flag.String("list", "", "what the list becomes on -trigger: big (about -list-bytes of ordinary tools) or bombs")
	listBytes = flag.Int("list-bytes", 15<<20+512<<10, "the size of the big list's JSON")
	trigger   = flag.String("trigger", "", "switch to -list when this file appears")
	changeFor = flag.Duration("change-for", 0, "after the switch, change the list every 100 ms for this long")
	changeAll = flag.Bool("change-schemas", false, "change the tools' schemas too, not only their descriptions")
	sleeper   = flag.String("sleeper", "", "be the grandchild: ignore SIGHUP and SIGTERM, sleep (the value marks it for the test)")
)

type server struct {
	mu  sync.Mutex // guards out
	out *bufio.Writer

	listMu sync.Mutex
	list   []byte // the tools array's JSON
}

func main() {
	flag.Parse()
	if *sleeper != "" {
		signal.Ignore(syscall.SIGHUP, syscall.SIGTERM)
		time.Sleep(time.Hour)
		return
	}
	s := &server{out: bufio.NewWriterSize(os.Stdout, 1<<20)}
	s.list = []byte(`[` + toolJSON("spawn", "Start a grandchild that leaves its group and session.", `{"type":"object"}`) + `,` +
		toolJSON("big", "A text result of bytes bytes.", `{"type":"object","properties":{"bytes":{"type":"integer"}}}`) + `,` +
		toolJSON("line", "A line of bytes bytes.", `{"type":"object","properties":{"bytes":{"type":"integer"}}}`) + `]`)
	if *trigger != "" {
		go s.watch()
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			return
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(line, &req) != nil || req.ID == nil {
			continue // a notification, or a response
		}
		switch req.Method {
		case "initialize":
			s.respond(req.ID, `{"protocolVersion":"2025-06-18","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"mcphostile","version":"1"}}`)
		case "tools/list":
			s.listMu.Lock()
			list := s.list
			s.listMu.Unlock()
			s.respond(req.ID, `{"tools":`+string(list)+`}`)
		case "tools/call":
			go s.call(req.ID, req.Params)
		case "ping":
			s.respond(req.ID, `{}`)
		default:
			s.send(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"error":{"code":-32601,"message":"no such method"}}`)
		}
	}
}

func (s *server) send(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.out.WriteString(line)
	s.out.WriteByte('\n')
	s.out.Flush()
}

func (s *server) respond(id json.RawMessage, result string) {
	s.send(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":` + result + `}`)
}

func text(s string) string {
	b, _ := json.Marshal(s)
	return `{"content":[{"type":"text","text":` + string(b) + `}]}`
}

func (s *server) call(id, params json.RawMessage) {
	var p struct {
		Name      string `json:"name"`
		Arguments struct {
			Bytes int `json:"bytes"`
		} `json:"arguments"`
	}
	json.Unmarshal(params, &p)
	switch p.Name {
	case "spawn":
		marker := fmt.Sprintf("mcphostile-sleeper-%d", time.Now().UnixNano())
		cmd := exec.Command(os.Args[0], "-sleeper", marker)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			s.respond(id, text("cannot start: "+err.Error()))
			return
		}
		go cmd.Wait()
		s.respond(id, text(marker))
	case "big":
		s.respond(id, text(strings.Repeat("x", p.Arguments.Bytes)))
	case "line":
		s.send(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"content":[{"type":"text","text":"` + strings.Repeat("y", p.Arguments.Bytes) + `"}]}}`)
	default:
		s.respond(id, `{"content":[{"type":"text","text":"no such tool"}],"isError":true}`)
	}
}

// watch waits for the trigger file, switches the list, and changes it if
// asked.
func (s *server) watch() {
	for {
		if _, err := os.Stat(*trigger); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.setList(0)
	if *changeFor <= 0 {
		return
	}
	end := time.Now().Add(*changeFor)
	for gen := 1; time.Now().Before(end); gen++ {
		time.Sleep(100 * time.Millisecond)
		s.setList(gen)
	}
}

func (s *server) setList(gen int) {
	var list string
	switch *listKind {
	case "bombs":
		list = bombs(gen)
	default:
		list = bigList(*listBytes, gen)
	}
	s.listMu.Lock()
	s.list = []byte(list)
	s.listMu.Unlock()
	s.send(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
}

func toolJSON(name, desc, schema string) string {
	d, _ := json.Marshal(desc)
	return `{"name":"` + name + `","description":` + string(d) + `,"inputSchema":` + schema + `}`
}

// bigList is a list of 1000 ordinary tools, about size bytes of JSON in
// all, each with a description and 20 described properties; gen is in
// every description (with -change-schemas, every property's too), so that
// each generation changes every tool.
func bigList(size, gen int) string {
	const tools, props = 1000, 20
	per := size / tools
	// A property is about 60 bytes plus its description.
	propDesc := max(per/2/props-60, 10)
	desc := max(per/2-40, 10)
	var b strings.Builder
	b.Grow(size + size/8)
	b.WriteByte('[')
	for i := range tools {
		if i > 0 {
			b.WriteByte(',')
		}
		var sch strings.Builder
		sch.WriteString(`{"type":"object","properties":{`)
		for p := range props {
			if p > 0 {
				sch.WriteByte(',')
			}
			pd := filler(propDesc, i*props+p)
			if *changeAll {
				pd = fmt.Sprintf("g%d %s", gen, pd[:len(pd)-len(strconv.Itoa(gen))-2])
			}
			fmt.Fprintf(&sch, `"param_%02d":{"type":"string","description":"%s"}`, p, pd)
		}
		sch.WriteString(`},"required":["param_00"]}`)
		b.WriteString(toolJSON(fmt.Sprintf("tool_%04d", i), fmt.Sprintf("Generation %d. %s", gen, filler(desc, i)), sch.String()))
	}
	b.WriteByte(']')
	return b.String()
}

// filler is n bytes of words.
func filler(n, seed int) string {
	words := []string{"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa", "lambda", "sigma"}
	var b strings.Builder
	for i := seed; b.Len() < n; i++ {
		b.WriteString(words[i%len(words)])
		b.WriteByte(' ')
	}
	return b.String()[:n]
}

// bombs is about 5 MiB of schema bombs: deep nesting (480 objects, 960
// arrays), a chain of $refs, an enum of 200,000 values and a union of
// 20,000 members, each in its own tool.
func bombs(gen int) string {
	var tools []string
	deep := func(n int, open, close string) string {
		return `{"type":"object","properties":{"a":` + strings.Repeat(open, n) + `{"type":"string"}` + strings.Repeat(close, n) + `}}`
	}
	tools = append(tools, toolJSON("deep_objects", "gen "+strconv.Itoa(gen), deep(480, `{"type":"object","properties":{"a":`, `}}`)))
	tools = append(tools, toolJSON("deep_arrays", "gen "+strconv.Itoa(gen), deep(960, `{"type":"array","items":`, `}`)))
	var defs strings.Builder
	for i := range 20000 {
		if i > 0 {
			defs.WriteByte(',')
		}
		fmt.Fprintf(&defs, `"d%d":{"$ref":"#/$defs/d%d"}`, i, i+1)
	}
	tools = append(tools, toolJSON("ref_chain", "gen "+strconv.Itoa(gen), `{"type":"object","properties":{"a":{"$ref":"#/$defs/d0"}},"$defs":{`+defs.String()+`}}`))
	var enum strings.Builder
	for i := range 200000 {
		if i > 0 {
			enum.WriteByte(',')
		}
		fmt.Fprintf(&enum, `"v%d"`, i)
	}
	tools = append(tools, toolJSON("huge_enum", "gen "+strconv.Itoa(gen), `{"type":"object","properties":{"e":{"enum":[`+enum.String()+`]}}}`))
	var union strings.Builder
	for i := range 20000 {
		if i > 0 {
			union.WriteByte(',')
		}
		fmt.Fprintf(&union, `{"type":"object","properties":{"k%d":{"type":"string"}},"required":["k%d"]}`, i, i)
	}
	tools = append(tools, toolJSON("huge_union", "gen "+strconv.Itoa(gen), `{"type":"object","properties":{"u":{"anyOf":[`+union.String()+`]}}}`))
	return "[" + strings.Join(tools, ",") + "]"
}
