package server_test

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-container/dsh-container/server"
)

// A reload from a file that does not load keeps the table: every tenant
// still authenticates, none of the bad file's does. A good file then
// replaces it.
func TestAuthReloadKeepsTheTableOnABadFile(t *testing.T) {
	dir := t.TempDir()
	entry := func(name, token string) string {
		sum := sha256.Sum256([]byte(token))
		return `{"name":"` + name + `","tokenSha256":"` + hex.EncodeToString(sum[:]) + `"}`
	}
	path := filepath.Join(dir, "auth.json")
	os.WriteFile(path, []byte(`{"tenants":[`+entry("alpha", "ta")+`]}`), 0o600)
	a, err := server.LoadAuth(path, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	bad := map[string]string{
		"not JSON":        `{"tenants":[` + entry("beta", "tb"),
		"a bad tenant":    `{"tenants":[` + entry("beta", "tb") + `,{"name":"gamma","tokenSha256":"00"}]}`,
		"no tenants":      `{"tenants":[]}`,
		"too large":       `{"tenants":[` + entry("beta", "tb") + `]}` + strings.Repeat(" ", server.MaxAuthFileBytes),
		"duplicate token": `{"tenants":[` + entry("beta", "tb") + `,` + entry("gamma", "tb") + `]}`,
	}
	for name, text := range bad {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, "bad.json")
			os.WriteFile(p, []byte(text), 0o600)
			if err := a.Reload(p, 1, 1); err == nil {
				t.Fatal("a bad file loaded")
			}
			if got, ok := a.Authenticate("ta"); !ok || got.Name != "alpha" {
				t.Fatalf("alpha after a failed reload: %q %v", got.Name, ok)
			}
			if got, ok := a.Authenticate("tb"); ok {
				t.Fatalf("the bad file's tenant %q authenticates", got.Name)
			}
			if ts := a.Tenants(); len(ts) != 1 || ts[0].Name != "alpha" {
				t.Fatalf("tenants %+v", ts)
			}
		})
	}
	if err := a.Reload(filepath.Join(dir, "missing.json"), 1, 1); err == nil {
		t.Fatal("a missing file loaded")
	}
	if _, ok := a.Authenticate("ta"); !ok {
		t.Fatal("alpha after a missing file")
	}
	os.WriteFile(path, []byte(`{"tenants":[`+entry("beta", "tb")+`]}`), 0o600)
	if err := a.Reload(path, 1, 1); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.Authenticate("ta"); ok {
		t.Fatal("alpha after it was removed")
	}
	if got, ok := a.Authenticate("tb"); !ok || got.Name != "beta" {
		t.Fatalf("beta after the reload: %q %v", got.Name, ok)
	}
}

// A token longer than MaxTokenBytes is refused even when it is a
// tenant's: its hash is in the table, and it is never computed.
func TestAuthenticateRefusesLongTokensOfTenants(t *testing.T) {
	long := strings.Repeat("k", server.MaxTokenBytes+1)
	edge := strings.Repeat("e", server.MaxTokenBytes)
	a := server.NewAuth([]server.Tenant{{Name: "long", TokenSHA256: hashOf(long)}, {Name: "edge", TokenSHA256: hashOf(edge)}})
	if got, ok := a.Authenticate(long); ok {
		t.Fatalf("a %d-byte token authenticated as %q", len(long), got.Name)
	}
	if got, ok := a.Authenticate(edge); !ok || got.Name != "edge" {
		t.Fatalf("a token of exactly %d bytes: %q %v", len(edge), got.Name, ok)
	}
	// Through the gate too: 401 on both endpoints.
	sf := newSessionFixture(t, server.WithAuth(a))
	if resp := sf.post(t, "/v1/run", bearer(long), `{"language":"python","code":"return 1"}`); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("POST /v1/run with the long token: %d", resp.StatusCode)
	}
	p := sf.dial(t, bearer(long))
	if m, _ := p.expect(server.FrameRefused); m["status"] != 401.0 {
		t.Fatalf("refused %v", m)
	}
	p.closed()
	if resp := sf.post(t, "/v1/run", bearer(edge), `{"language":"python","code":"return 1"}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/run with the edge token: %d", resp.StatusCode)
	}
}
