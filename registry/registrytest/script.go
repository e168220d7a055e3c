package registrytest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Script is a parsed program of binding calls, one statement per line:
//
//	# comment                 (blank lines too)
//	log TEXT                  console.log(TEXT)
//	call NAME [ARGS]          await tools[NAME](ARGS) and log the result; a rejection throws
//	try NAME [ARGS]           like call, but a rejection logs "error: MESSAGE" and goes on
//	go NAME [ARGS]            start tools[NAME](ARGS) without awaiting it
//	wait                      await every started call, logging each outcome in start order
//	sleep DURATION            sleep (time.ParseDuration syntax), or until the run is cancelled
//	return JSON               return the value
//	throw MESSAGE             throw an Error
//
// NAME is a bare word or a JSON string (for names with spaces); ARGS is
// JSON, {} when omitted, passed to the binding byte for byte (so it may be
// invalid on purpose). Calls started with go and not awaited are awaited
// when the script ends, like dangling promises a runtime drains.
type Script struct {
	stmts []stmt
}

type stmt struct {
	line int
	op   string
	name string
	arg  string
	dur  time.Duration
}

// ParseScript parses a script. An error is the script's syntax error.
func ParseScript(src string) (*Script, error) {
	s := &Script{}
	sc := bufio.NewScanner(strings.NewReader(src))
	sc.Buffer(make([]byte, 0, 64*1024), len(src)+1)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		op, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		st := stmt{line: n, op: op}
		switch op {
		case "log", "throw":
			st.arg = rest
		case "wait":
			if rest != "" {
				return nil, fmt.Errorf("SyntaxError: line %d: wait takes no argument", n)
			}
		case "sleep":
			d, err := time.ParseDuration(rest)
			if err != nil {
				return nil, fmt.Errorf("SyntaxError: line %d: %v", n, err)
			}
			st.dur = d
		case "return":
			if !json.Valid([]byte(rest)) {
				return nil, fmt.Errorf("SyntaxError: line %d: return needs a JSON value", n)
			}
			st.arg = rest
		case "call", "try", "go":
			name, args, err := splitName(rest)
			if err != nil {
				return nil, fmt.Errorf("SyntaxError: line %d: %v", n, err)
			}
			st.name, st.arg = name, args
		default:
			return nil, fmt.Errorf("SyntaxError: line %d: unknown statement %q", n, op)
		}
		s.stmts = append(s.stmts, st)
	}
	return s, nil
}

func splitName(rest string) (name, args string, err error) {
	if rest == "" {
		return "", "", errors.New("missing tool name")
	}
	if rest[0] == '"' {
		dec := json.NewDecoder(strings.NewReader(rest))
		if err := dec.Decode(&name); err != nil {
			return "", "", fmt.Errorf("bad quoted tool name: %v", err)
		}
		tail, _ := io.ReadAll(dec.Buffered())
		args = strings.TrimSpace(string(tail))
	} else {
		name, args, _ = strings.Cut(rest, " ")
		args = strings.TrimSpace(args)
	}
	if args == "" {
		args = "{}"
	}
	return name, args, nil
}

// Program returns the script as a Program.
func (s *Script) Program() Program {
	return func(ctx context.Context, env *Env) (any, error) {
		var pending []*Pending
		defer func() {
			for _, p := range pending {
				p.Wait()
			}
		}()
		for _, st := range s.stmts {
			switch st.op {
			case "log":
				env.Log(st.arg)
			case "throw":
				return nil, errors.New(st.arg)
			case "return":
				return json.RawMessage(st.arg), nil
			case "sleep":
				t := time.NewTimer(st.dur)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					return nil, ctx.Err()
				}
			case "call", "try":
				v, err := env.Call(st.name, json.RawMessage(st.arg))
				if err != nil && st.op == "call" {
					return nil, fmt.Errorf("line %d: %w", st.line, err)
				}
				env.Log(outcome(v, err))
			case "go":
				pending = append(pending, env.Go(st.name, json.RawMessage(st.arg)))
			case "wait":
				for _, p := range pending {
					env.Log(outcome(p.Wait()))
				}
				pending = nil
			}
		}
		return nil, nil
	}
}

func outcome(v json.RawMessage, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return Text(bytes.TrimSpace(v))
}
