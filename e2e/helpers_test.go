package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dsh-container/dsh-container/backend"
)

// Assertions and builders for the e2e tests that stay Docker-specific
// (faults, host bounds, seccomp probes, the registry over a real runtime,
// hostile values). The driver-neutral suite has its own in
// backend/container/containertest.

func both(tsProg, pyProg string) map[backend.Language]string {
	return map[backend.Language]string{backend.TypeScript: tsProg, backend.Python: pyProg}
}

func tools(fns map[string]backend.BindingFunc) []backend.BindingNamespace {
	return []backend.BindingNamespace{{Global: "tools", Functions: fns}}
}

func echo(_ context.Context, args json.RawMessage) (json.RawMessage, error) { return args, nil }

func ok(t *testing.T, res backend.RunResult) {
	t.Helper()
	if res.Error != nil {
		t.Fatalf("program failed: %s: %s\nlogs: %+v", res.Error.Kind, res.Error.Message, res.Logs)
	}
}

func wantValue(t *testing.T, res backend.RunResult, want string) {
	t.Helper()
	ok(t, res)
	var got, exp any
	if err := json.Unmarshal(res.Value, &got); err != nil {
		t.Fatalf("value %q: %v", res.Value, err)
	}
	if err := json.Unmarshal([]byte(want), &exp); err != nil {
		t.Fatal(err)
	}
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(exp)
	if string(g) != string(w) {
		t.Fatalf("value %s, want %s", g, w)
	}
}

func wantFailure(t *testing.T, res backend.RunResult, kind backend.FailureKind, substrs ...string) {
	t.Helper()
	if res.Error == nil {
		t.Fatalf("program succeeded with %s, want %s", res.Value, kind)
	}
	if res.Error.Kind != kind {
		t.Fatalf("failure %s: %s, want %s", res.Error.Kind, res.Error.Message, kind)
	}
	for _, s := range substrs {
		if !strings.Contains(res.Error.Message, s) {
			t.Fatalf("failure message %q lacks %q", res.Error.Message, s)
		}
	}
}

func decode[T any](t *testing.T, res backend.RunResult) T {
	t.Helper()
	ok(t, res)
	var v T
	if err := json.Unmarshal(res.Value, &v); err != nil {
		t.Fatalf("value %s: %v", res.Value, err)
	}
	return v
}

// outcome logs the case's typed outcome in the quotable form (the same as
// the conformance suite's):
//
//	OUTCOME <lang> <test name>: <kind> [flags] (wall, cpu) <detail>
func outcome(t *testing.T, lang backend.Language, res backend.RunResult, detail string, args ...any) {
	t.Helper()
	kind := "ok"
	if res.Error != nil {
		kind = string(res.Error.Kind)
	}
	var flags []string
	if res.LogsTruncated {
		flags = append(flags, "logsTruncated")
	}
	if res.ValueTruncated {
		flags = append(flags, "valueTruncated")
	}
	f := ""
	if len(flags) > 0 {
		f = " [" + strings.Join(flags, ",") + "]"
	}
	t.Logf("OUTCOME %s %s: %s%s (wall %v, cpu %v) %s", lang, t.Name(), kind, f,
		res.Stats.Wall.Round(time.Millisecond), res.Stats.CPU.Round(time.Millisecond), fmt.Sprintf(detail, args...))
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}
