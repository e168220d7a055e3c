package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/dsh-container/dsh-container/backend/container/containertest"
	"github.com/dsh-container/dsh-container/client"
	"github.com/dsh-container/dsh-container/internal/testenv"
)

// `serve --runtime runc --allow-runtimes runc,runsc`: a request runs
// under runc by default and by name, under gVisor when it names runsc (the
// program sees the Sentry's /proc), and naming a runtime not listed is a
// 400 listing the allowed ones. A daemon without runsc skips, unless
// DSH_TEST_OCI_RUNTIMES requires it.
//
//	go test -count=1 -run TestServeAllowRuntimes -v ./e2e/
func TestServeAllowRuntimes(t *testing.T) {
	required, info := runtimesInfo(t)
	rt, found := info.Runtimes[containertest.GVisor]
	switch {
	case !found && required[containertest.GVisor]:
		t.Fatalf("the daemon has no runsc runtime, and %s requires it", requiredRuntimesVar)
	case !found:
		testenv.Unsupported(t, "the daemon has no runsc runtime (it has %v)", keys(info.Runtimes))
	case len(missingFlags(rt.Args, runscFlags)) > 0:
		t.Fatalf("runsc is registered without %q", missingFlags(rt.Args, runscFlags))
	}

	s := startServe(t, "--pool", "1", "--languages", "python,typescript", "--runtime", "runc", "--allow-runtimes", "runc,runsc", "--wall-timeout", "60s")
	post := func(body map[string]string) (int, string) {
		t.Helper()
		b, _ := json.Marshal(body)
		resp, err := s.hc.Post("http://dsh/v1/run", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out bytes.Buffer
		out.ReadFrom(resp.Body)
		return resp.StatusCode, out.String()
	}
	// gVisor's Sentry has a /proc/sentry-meminfo; Linux has not.
	py := "import os\nreturn os.path.exists('/proc/sentry-meminfo')"
	for _, c := range []struct{ runtime, want string }{{"", "false"}, {"runc", "false"}, {"runsc", "true"}} {
		code, body := post(map[string]string{"language": "python", "code": py, "runtime": c.runtime})
		var r serveRunResponse
		if code != http.StatusOK || json.Unmarshal([]byte(body), &r) != nil || r.Error != nil || string(r.Value) != c.want {
			t.Errorf("runtime %q: %d %s, want the value %s", c.runtime, code, body, c.want)
		}
	}
	// TypeScript under gVisor too (no file access in the program: the
	// runtime's answer is the outcome).
	if code, body := post(map[string]string{"language": "typescript", "code": "return 6*7", "runtime": "runsc"}); code != http.StatusOK || !strings.Contains(body, `"value":42`) {
		t.Errorf("typescript under runsc: %d %s", code, body)
	}
	// A session names it too, through the Go client.
	rep, err := (&client.Client{URL: "unix://" + s.sock}).Run(context.Background(), client.Request{Language: "python", Code: py, Runtime: "runsc"}, nil, client.Handlers{})
	if err != nil || rep.Error != nil || string(rep.Value) != "true" {
		t.Errorf("session under runsc: %+v %v", rep, err)
	}
	code, body := post(map[string]string{"language": "python", "code": "return 1", "runtime": "crun"})
	if code != http.StatusBadRequest || !strings.Contains(body, `runtime \"crun\" is not allowed here for python (allowed: runc, runsc)`) {
		t.Errorf("runtime crun: %d %s", code, body)
	}
}
