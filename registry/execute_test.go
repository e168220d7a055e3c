package registry

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/containerd/errdefs"
)

func TestExecuteNative(t *testing.T) {
	var seen Execution
	record := Tool{Name: "record", Execute: func(_ context.Context, exec Execution) ([]Block, error) {
		seen = exec
		return []Block{TextBlock("ok")}, nil
	}}
	tests := []struct {
		name     string
		mode     Mode
		call     Call
		wantErr  func(error) bool
		wantText string
	}{
		{name: "ok", call: Call{ID: "c1", Name: "echo", Arguments: json.RawMessage(`{"b":1,"a":"<x>"}`)}, wantText: `echo {"a":"<x>","b":1}`},
		{name: "no arguments", call: Call{ID: "c1", Name: "echo"}, wantText: `echo {}`},
		{name: "nil content", call: Call{ID: "c1", Name: "empty"}, wantText: ""},
		{name: "unknown tool", call: Call{ID: "c1", Name: "nope"}, wantErr: errdefs.IsNotFound, wantText: `tool "nope" is not available`},
		{name: "hidden tool", call: Call{ID: "c1", Name: "echo", Scope: Scope{}.Restrict(Deny("echo"))}, wantErr: errdefs.IsNotFound, wantText: `tool "echo" is not available`},
		{name: "run_code in native mode", call: runCall("c1", "log x"), wantErr: errdefs.IsNotFound, wantText: `tool "run_code" is not available in mode "native"`},
		{name: "no id", call: Call{Name: "echo"}, wantErr: errdefs.IsInvalidArgument, wantText: "has no id"},
		{name: "NaN arguments", call: Call{ID: "c1", Name: "echo", Arguments: json.RawMessage(`{"x":NaN}`)}, wantErr: errdefs.IsInvalidArgument, wantText: "not lossless JSON"},
		{name: "tool error", call: Call{ID: "c1", Name: "fail"}, wantText: "disk full"},
		{name: "tool panic", call: Call{ID: "c1", Name: "panic"}, wantErr: errdefs.IsInternal, wantText: `tool "panic" panicked: boom`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newReg(t, WithMode(tt.mode))
			mustRegister(t, r, echoTool("echo"), failTool("fail", "disk full"), record,
				Tool{Name: "empty", Execute: func(context.Context, Execution) ([]Block, error) { return nil, nil }},
				Tool{Name: "panic", Execute: func(context.Context, Execution) ([]Block, error) { panic("boom") }},
			)
			res := r.Execute(t.Context(), tt.call)
			if res.CallID != tt.call.ID || res.Name != tt.call.Name {
				t.Errorf("identity = %q/%q, want %q/%q", res.CallID, res.Name, tt.call.ID, tt.call.Name)
			}
			wantIsError := tt.wantErr != nil || tt.name == "tool error"
			if res.IsError != wantIsError {
				t.Fatalf("IsError = %v, want %v (%s)", res.IsError, wantIsError, res.Text())
			}
			if tt.wantErr != nil && !tt.wantErr(res.Err) {
				t.Errorf("Err = %v, wrong class", res.Err)
			}
			if !strings.Contains(res.Text(), tt.wantText) || tt.wantText == "" && res.Text() != "" {
				t.Errorf("text = %q, want %q", res.Text(), tt.wantText)
			}
			if res.Content == nil {
				t.Errorf("Content is nil; want a (possibly empty) slice")
			}
		})
	}
	r := newReg(t)
	mustRegister(t, r, record)
	r.Execute(t.Context(), Call{ID: "c9", Name: "record", Arguments: json.RawMessage(` [1, 2.50] `)})
	if seen.CallID != "c9" || seen.Name != "record" || seen.Parent != "" || string(seen.Arguments) != `[1,2.50]` {
		t.Errorf("tool saw %+v", seen)
	}
}

func TestExecuteCancelledBeforeStart(t *testing.T) {
	r := newReg(t)
	ran := false
	mustRegister(t, r, Tool{Name: "x", Execute: func(context.Context, Execution) ([]Block, error) { ran = true; return nil, nil }})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res := r.Execute(ctx, Call{ID: "c", Name: "x"})
	if !res.IsError || !errdefs.IsCanceled(res.Err) || ran {
		t.Fatalf("res = %+v ran=%v; want a canceled error result, tool not run", res, ran)
	}
}

// TestPipelineStages pins the stage order and what a denial or a
// pre-execute failure skips.
func TestPipelineStages(t *testing.T) {
	tests := []struct {
		name      string
		preErr    error
		deny      error
		want      []string
		wantDeny  bool
		wantError bool
	}{
		{name: "all stages", want: []string{"pre1", "pre2", "guard1", "guard2", "execute", "post1", "post2", "observe"}},
		{name: "denied", deny: errors.New("not today"), want: []string{"pre1", "pre2", "guard1", "observe"}, wantDeny: true, wantError: true},
		{name: "pre-execute fails", preErr: errors.New("quota"), want: []string{"pre1", "observe"}, wantError: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			step := func(s string) { got = append(got, s) }
			var observed Result
			r := newReg(t,
				WithPreExecute(func(context.Context, Execution) error { step("pre1"); return tt.preErr }),
				WithPreExecute(func(context.Context, Execution) error { step("pre2"); return nil }),
				WithGuard(func(context.Context, Execution) error { step("guard1"); return tt.deny }),
				WithGuard(func(context.Context, Execution) error { step("guard2"); return nil }),
				WithPostExecute(func(_ context.Context, _ Execution, res Result) Result {
					step("post1")
					res.Content = append(res.Content, TextBlock("post1"))
					res.CallID, res.Name = "forged", "forged" // identity is restored
					return res
				}),
				WithPostExecute(func(_ context.Context, exec Execution, res Result) Result {
					step("post2")
					if res.CallID != exec.CallID {
						t.Errorf("post2 saw a forged id %q", res.CallID)
					}
					return res
				}),
				WithResultObserver(func(_ context.Context, _ Execution, res Result) {
					step("observe")
					observed = res
					res.Content[0].Text = "mutated" // cannot change the result
				}),
				WithPreExecute(nil), WithGuard(nil), WithPostExecute(nil), WithResultObserver(nil),
			)
			mustRegister(t, r, Tool{Name: "t", Execute: func(context.Context, Execution) ([]Block, error) {
				step("execute")
				return []Block{TextBlock("out")}, nil
			}})
			res := r.Execute(t.Context(), Call{ID: "c1", Name: "t"})
			if !slices.Equal(got, tt.want) {
				t.Errorf("stages = %q, want %q", got, tt.want)
			}
			if res.IsError != tt.wantError || res.CallID != "c1" || res.Name != "t" {
				t.Errorf("res = %+v", res)
			}
			var denied *DeniedError
			if errors.As(res.Err, &denied) != tt.wantDeny {
				t.Errorf("Err = %v, want denial %v", res.Err, tt.wantDeny)
			}
			if tt.wantDeny {
				if !errdefs.IsPermissionDenied(res.Err) || !errors.Is(res.Err, tt.deny) || denied.CallID != "c1" || denied.Tool != "t" {
					t.Errorf("denial = %+v", denied)
				}
				if res.Text() != `tool "t" denied: not today` {
					t.Errorf("denial text = %q", res.Text())
				}
			}
			if tt.preErr != nil && (!errors.Is(res.Err, tt.preErr) || !strings.Contains(res.Text(), "pre-execute: quota")) {
				t.Errorf("pre-execute failure = %v", res.Err)
			}
			if !tt.wantError && res.Text() != "out\npost1" {
				t.Errorf("text = %q, want the post-executed result", res.Text())
			}
			if observed.CallID != "c1" || res.Content[0].Text == "mutated" {
				t.Errorf("observer saw %+v; result after observers %q", observed, res.Text())
			}
		})
	}
}

func TestObserverSeesResolutionFailures(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	r := newReg(t, WithResultObserver(func(_ context.Context, exec Execution, res Result) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, exec.CallID+" "+res.Name+" "+res.Text())
	}), WithResultObserver(func(context.Context, Execution, Result) { panic("observer bug") }))
	r.Execute(t.Context(), Call{ID: "c1", Name: "ghost"})
	if want := []string{`c1 ghost tool "ghost" is not available`}; !slices.Equal(seen, want) {
		t.Fatalf("observed %q, want %q", seen, want)
	}
}
