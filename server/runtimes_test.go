package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/registry/registrytest"
	"github.com/dsh-container/dsh-container/server"
)

// A request chooses among the runtimes the server allows by name, the
// default without one; any other name is a 400 listing the allowed ones,
// and a server that allows none refuses the key whatever its value.
func TestRequestChoosesAllowedRuntime(t *testing.T) {
	ts := registrytest.New(backend.TypeScript)
	defer ts.Close(context.Background())
	gvisor := errRuntime{lang: backend.TypeScript, err: errors.New("ran under the runsc runtime")}
	srv, err := server.New(
		server.WithRuntime(ts),
		server.WithNamedRuntime("runc", ts),
		server.WithNamedRuntime("runsc", gvisor),
		server.WithLogger(testLogger(t)),
	)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(srv.Runtimes(), ","); got != "runc,runsc" {
		t.Errorf("Runtimes() = %q", got)
	}
	post := func(srv *server.Server, body string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/run", strings.NewReader(body)))
		return rec
	}
	for _, c := range []struct {
		name, body string
		status     int
		want       string
	}{
		{"default", `{"language":"typescript","code":"return 1"}`, http.StatusOK, `"value":1`},
		{"the default by name", `{"language":"typescript","code":"return 1","runtime":"runc"}`, http.StatusOK, `"value":1`},
		{"an allowed one", `{"language":"typescript","code":"return 1","runtime":"runsc"}`, 0, "ran under the runsc runtime"},
		{"not allowed", `{"language":"typescript","code":"return 1","runtime":"crun"}`, http.StatusBadRequest, `runtime \"crun\" is not allowed here for typescript (allowed: runc, runsc)`},
		{"not a string", `{"language":"typescript","code":"return 1","runtime":1}`, http.StatusBadRequest, "invalid JSON body"},
		{"too long", `{"language":"typescript","code":"return 1","runtime":"` + strings.Repeat("r", 65) + `"}`, http.StatusBadRequest, "at most 64 bytes"},
	} {
		rec := post(srv, c.body)
		if (c.status != 0 && rec.Code != c.status) || !strings.Contains(rec.Body.String(), c.want) {
			t.Errorf("%s: %d %s, want %d with %q", c.name, rec.Code, rec.Body, c.status, c.want)
		}
	}

	plain, err := server.New(server.WithRuntime(ts))
	if err != nil {
		t.Fatal(err)
	}
	if plain.Runtimes() != nil {
		t.Errorf("Runtimes() = %q without WithNamedRuntime", plain.Runtimes())
	}
	rec := post(plain, `{"language":"typescript","code":"return 1","runtime":"runc"}`)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "does not let requests choose an OCI runtime") {
		t.Errorf("no choices: %d %s", rec.Code, rec.Body)
	}
}

func TestSessionChoosesAllowedRuntime(t *testing.T) {
	py := registrytest.New(backend.Python)
	defer py.Close(context.Background())
	sf := newSessionFixture(t, server.WithNamedRuntime("runc", py))
	p := sf.dial(t, nil)
	st := start("python", "return 7")
	st.Runtime = "runsc"
	p.send(st)
	m, _ := p.expect(server.FrameRefused)
	if m["status"] != float64(http.StatusBadRequest) || !strings.Contains(m["error"].(string), `runtime "runsc" is not allowed here for python (allowed: runc)`) {
		t.Errorf("refused %v", m)
	}

	p = sf.dial(t, nil)
	st.Runtime = "runc"
	p.send(st)
	p.expect(server.FrameAccepted)
	m, _ = p.expect(server.FrameDone)
	if b, _ := json.Marshal(m); !strings.Contains(string(b), `"value":7`) {
		t.Errorf("done %v", m)
	}
}

func TestNewRejectsBadNamedRuntimes(t *testing.T) {
	ts := registrytest.New(backend.TypeScript)
	defer ts.Close(context.Background())
	py := registrytest.New(backend.Python)
	defer py.Close(context.Background())
	for _, c := range []struct {
		name string
		opts []server.Option
		want string
	}{
		{"empty name", []server.Option{server.WithNamedRuntime("", ts)}, "must be 1 to 64 bytes"},
		{"twice", []server.Option{server.WithNamedRuntime("runc", ts), server.WithNamedRuntime("runc", ts)}, `"runc" given twice for typescript`},
		{"language without a default", []server.Option{server.WithNamedRuntime("runc", py)}, "has no default runtime"},
		{"nil", []server.Option{server.WithNamedRuntime("runc", nil)}, "nil runtime"},
	} {
		_, err := server.New(append([]server.Option{server.WithRuntime(ts)}, c.opts...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
