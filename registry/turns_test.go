package registry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/registry"
	"github.com/dsh-container/dsh-container/registry/registrytest"
)

var update = flag.Bool("update", false, "rewrite the turn fixtures in testdata/turns")

// turnsDir holds one JSON file per assembled turn (seed 001 § Testing:
// "The code-mode-turn and both-mode-turn fixtures pin the SDK section,
// header tool list, dispatch events, and result card"). A file's "input"
// says what to assemble and run; everything else in it is the turn the
// registry produced, rewritten by go test ./registry -run TestTurns -update.
const turnsDir = "testdata/turns"

// turnInput is what a fixture asks for.
type turnInput struct {
	// Mode is the registry's presentation mode.
	Mode registry.Mode `json:"mode"`
	// Language is the code runtime's language.
	Language backend.Language `json:"language"`
	// CallID is the model's id for the run_code call.
	CallID string `json:"callId"`
	// Program is the program the model writes: the run_code argument, so
	// the text the call card shows.
	Program string `json:"program"`
	// Script is what the scripted runtime (registrytest.Script) does when
	// it runs Program: the same tool calls, logs and return value.
	Script string `json:"script"`
}

// turn is one assembled turn: what the model is offered, the call it
// makes, what the run logs and what comes back.
type turn struct {
	Input turnInput `json:"input"`
	// Assembly is the registry's contribution to the request: the header
	// tool list (with run_code's schema and description) and the SDK
	// section.
	Assembly registry.Assembly `json:"assembly"`
	// Call is the model's run_code call and its presentation card.
	Call turnCall `json:"call"`
	// Events are the run's tool/code-dispatch events, in emission order.
	Events []registry.Event `json:"events"`
	// Result is the run_code result: content, isError and result card.
	Result registry.Result `json:"result"`
}

type turnCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Card      *registry.Card  `json:"card"`
}

// workspace is the files turnTools read.
var workspace = map[string]string{
	"notes.txt": "buy milk\nTODO: call the plumber",
	"a.txt":     "alpha",
	"b.txt":     "beta",
}

// turnTools is the tool set every turn registers: deterministic stand-ins
// for a workspace's tools, one of which fails for a missing file.
func turnTools() []registry.Tool {
	return []registry.Tool{
		{
			Name:        "read_file",
			Description: "Read a text file from the workspace.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"Relative to the workspace."}},"required":["path"]}`),
			Execute: func(_ context.Context, exec registry.Execution) ([]registry.Block, error) {
				var a struct{ Path string }
				if err := json.Unmarshal(exec.Arguments, &a); err != nil {
					return nil, err
				}
				text, ok := workspace[a.Path]
				if !ok {
					return nil, fmt.Errorf("%s: no such file", a.Path)
				}
				return []registry.Block{registry.TextBlock(text)}, nil
			},
		},
		{
			Name:        "search",
			Description: "Search files for a pattern.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"pattern":{"type":"string"},"paths":{"type":"array","items":{"type":"string"}}},"required":["pattern"]}`),
			Execute: func(context.Context, registry.Execution) ([]registry.Block, error) {
				return []registry.Block{registry.TextBlock("src/main.go:12: // TODO: handle errors")}, nil
			},
		},
		{
			Name:        "write_file",
			Description: "Write a text file to the workspace.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"},"mode":{"enum":["overwrite","append"]}},"required":["path","content"]}`),
			Execute: func(context.Context, registry.Execution) ([]registry.Block, error) {
				return nil, errors.New("the workspace is read-only")
			},
		},
	}
}

// assembleTurn builds a registry for in and plays the turn: assemble, the
// model's run_code call, the run over the scripted runtime.
func assembleTurn(t *testing.T, in turnInput) turn {
	t.Helper()
	script, err := registrytest.ParseScript(in.Script)
	if err != nil {
		t.Fatalf("input script: %v", err)
	}
	rt := registrytest.New(in.Language)
	rt.Handle(in.Program, script.Program())
	var (
		mu     sync.Mutex
		events = []registry.Event{}
	)
	reg := registry.New(
		registry.WithMode(in.Mode),
		registry.WithRuntime(rt),
		registry.WithEventSink(func(ev registry.Event) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, ev)
		}),
	)
	for _, tool := range turnTools() {
		if err := reg.Register(tool); err != nil {
			t.Fatal(err)
		}
	}

	asm, err := reg.Assemble(t.Context(), registry.Scope{})
	if err != nil {
		t.Fatalf("Assemble: %v", err)
	}
	call := registry.Call{ID: in.CallID, Name: registry.RunCode, Arguments: marshalJSON(t, map[string]string{"code": in.Program}, "")}
	card := reg.PresentCall(call)
	res := reg.Execute(t.Context(), call)
	if res.CodeRun == nil {
		t.Fatalf("run_code did not run the program: %s", res.Text())
	}
	if reqs := rt.Requests(); len(reqs) != 1 || reqs[0].Program != in.Program {
		t.Fatalf("the runtime did not get the program once: %d requests", len(reqs))
	}
	mu.Lock()
	defer mu.Unlock()
	return turn{
		Input:    in,
		Assembly: asm,
		Call:     turnCall{ID: call.ID, Name: call.Name, Arguments: call.Arguments, Card: card},
		Events:   events,
		Result:   res,
	}
}

// marshalJSON encodes v with <, > and & as written, so that programs stay
// readable, indented by indent ("" for compact), without a final newline.
func marshalJSON(t *testing.T, v any, indent string) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// readTurnInput reads a fixture's input, rejecting unknown input fields.
func readTurnInput(t *testing.T, data []byte) turnInput {
	t.Helper()
	var file struct {
		Input json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(data, &file); err != nil || file.Input == nil {
		t.Fatalf("not a turn fixture (want a JSON object with an \"input\"): %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(file.Input))
	dec.DisallowUnknownFields()
	var in turnInput
	if err := dec.Decode(&in); err != nil {
		t.Fatalf("input: %v", err)
	}
	return in
}

// TestTurns plays every fixture in testdata/turns through the real
// registry over the scripted runtime and compares the turn with the file.
func TestTurns(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(turnsDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no turn fixtures in %s", turnsDir)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".json"), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			got := append(marshalJSON(t, assembleTurn(t, readTurnInput(t, data)), "  "), '\n')
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if !bytes.Equal(got, data) {
				t.Errorf("%s differs from the turn the registry assembles (go test ./registry -run TestTurns -update rewrites it):\n%s",
					path, firstDiff(string(data), string(got)))
			}
		})
	}
}

// firstDiff shows the first line where want and got differ.
func firstDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := range max(len(wl), len(gl)) {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g || i >= len(wl) || i >= len(gl) {
			return fmt.Sprintf("line %d:\n- %s\n+ %s", i+1, w, g)
		}
	}
	return "(no line differs)"
}
