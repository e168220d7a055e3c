package server

// Authentication and tenants: bearer tokens checked against SHA-256
// hashes from an auth file, the tenant each token names, and the gate in
// front of every endpoint.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containerd/errdefs"
)

// AnonymousTenant is the tenant of every request when the server has no
// auth file: the server's quotas apply to it, and metrics label its runs
// with this name.
const AnonymousTenant = "anonymous"

// MaxAuthFileBytes bounds an auth file.
const MaxAuthFileBytes = 4 << 20

// MaxTokenBytes bounds a bearer token a request may present. Longer ones
// are refused without being hashed.
const MaxTokenBytes = 4096

// Tenant is one client of the daemon: who a bearer token names, and its
// admission quota.
type Tenant struct {
	// Name identifies the tenant in metrics and logs: 1 to 64 characters
	// of [A-Za-z0-9_.-].
	Name string
	// TokenSHA256 is the SHA-256 hash of the tenant's bearer token.
	TokenSHA256 [sha256.Size]byte
	// MaxRuns bounds the tenant's programs running at once (0: no bound
	// but the server's); Queue bounds its programs waiting for a slot.
	MaxRuns int
	Queue   int
	// Metrics allows the tenant to read GET /metrics, which names every
	// tenant and its traffic. Other tenants get 403 there.
	Metrics bool
}

// tenantFile is the JSON of an auth file.
type tenantFile struct {
	Tenants []struct {
		Name        string `json:"name"`
		TokenSHA256 string `json:"tokenSha256"`
		MaxRuns     *int   `json:"maxRuns"`
		Queue       *int   `json:"queue"`
		Metrics     bool   `json:"metrics"`
	} `json:"tenants"`
}

var tenantName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// ParseAuthFile reads an auth file:
//
//	{"tenants":[{"name":"alpha","tokenSha256":"<64 hex digits>","maxRuns":N,"queue":N,"metrics":true}]}
//
// maxRuns and queue are optional: an absent one is the server's --max-runs
// or --queue, given here as defMaxRuns and defQueue. Names and token
// hashes must be unique; unknown fields are errors. Errors wrap
// errdefs.ErrInvalidArgument and never contain a hash.
func ParseAuthFile(data []byte, defMaxRuns, defQueue int) ([]Tenant, error) {
	invalid := func(format string, args ...any) ([]Tenant, error) {
		return nil, fmt.Errorf("%w: auth file: %s", errdefs.ErrInvalidArgument, fmt.Sprintf(format, args...))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f tenantFile
	if err := dec.Decode(&f); err != nil {
		return invalid("%v (want {\"tenants\":[{\"name\",\"tokenSha256\",\"maxRuns\"?,\"queue\"?}]})", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalid("trailing data after the object")
	}
	if len(f.Tenants) == 0 {
		return invalid("no tenants: every request would be refused")
	}
	names := map[string]bool{}
	hashes := map[[sha256.Size]byte]string{}
	out := make([]Tenant, 0, len(f.Tenants))
	for i, t := range f.Tenants {
		if !tenantName.MatchString(t.Name) {
			return invalid("tenants[%d]: name %q must be 1 to 64 characters of A-Z a-z 0-9 _ . -", i, t.Name)
		}
		if names[t.Name] {
			return invalid("tenant %q is listed twice", t.Name)
		}
		names[t.Name] = true
		raw, err := hex.DecodeString(t.TokenSHA256)
		if err != nil || len(raw) != sha256.Size {
			return invalid("tenant %q: tokenSha256 must be 64 hexadecimal digits (the SHA-256 of its token: printf %%s \"$TOKEN\" | sha256sum)", t.Name)
		}
		tn := Tenant{Name: t.Name, MaxRuns: defMaxRuns, Queue: defQueue, Metrics: t.Metrics}
		copy(tn.TokenSHA256[:], raw)
		if other, dup := hashes[tn.TokenSHA256]; dup {
			return invalid("tenants %q and %q have the same token", other, t.Name)
		}
		hashes[tn.TokenSHA256] = t.Name
		if t.MaxRuns != nil {
			if *t.MaxRuns < 0 {
				return invalid("tenant %q: maxRuns must not be negative", t.Name)
			}
			tn.MaxRuns = *t.MaxRuns
		}
		if t.Queue != nil {
			if *t.Queue < 0 {
				return invalid("tenant %q: queue must not be negative", t.Name)
			}
			tn.Queue = *t.Queue
		}
		out = append(out, tn)
	}
	return out, nil
}

// Auth is the tenant table a server checks bearer tokens against. Its
// tenants can be replaced while the server runs (SIGHUP in the daemon):
// a request is checked against the table of the moment it arrives, and
// runs in flight are never affected. It is safe for concurrent use.
type Auth struct {
	tenants atomic.Pointer[[]Tenant]

	// checks are run on every table Reload reads, before it is taken; a
	// check that returns an error keeps the old table. The servers using
	// the table add one that never refuses: it logs when the tenants
	// oversubscribe their request memory.
	mu     sync.Mutex
	checks []func([]Tenant) error
}

// NewAuth returns a table holding tenants.
func NewAuth(tenants []Tenant) *Auth {
	a := &Auth{}
	a.Set(tenants)
	return a
}

// LoadAuth reads an auth file (see ParseAuthFile).
func LoadAuth(path string, defMaxRuns, defQueue int) (*Auth, error) {
	tenants, err := readAuthFile(path, defMaxRuns, defQueue)
	if err != nil {
		return nil, err
	}
	return NewAuth(tenants), nil
}

// Reload replaces the table with the file's tenants. On error (a file
// that does not parse, or a table a check refuses) the table is
// unchanged. A table whose tenants oversubscribe a server's request
// memory is taken, with a warning (see WithMaxRequestBytes).
func (a *Auth) Reload(path string, defMaxRuns, defQueue int) error {
	tenants, err := readAuthFile(path, defMaxRuns, defQueue)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, check := range a.checks {
		if err := check(tenants); err != nil {
			return fmt.Errorf("auth file %s: %w", path, err)
		}
	}
	a.Set(tenants)
	return nil
}

// addCheck makes Reload run check on each table it reads, and keep the
// old table when check returns an error.
func (a *Auth) addCheck(check func([]Tenant) error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.checks = append(a.checks, check)
}

func readAuthFile(path string, defMaxRuns, defQueue int) ([]Tenant, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: auth file: %w", errdefs.ErrInvalidArgument, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxAuthFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: auth file %s: %w", errdefs.ErrInvalidArgument, path, err)
	}
	if len(data) > MaxAuthFileBytes {
		return nil, fmt.Errorf("%w: auth file %s exceeds %d bytes", errdefs.ErrInvalidArgument, path, MaxAuthFileBytes)
	}
	tenants, err := ParseAuthFile(data, defMaxRuns, defQueue)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return tenants, nil
}

// Set replaces the tenants, without the checks of Reload.
func (a *Auth) Set(tenants []Tenant) {
	t := append([]Tenant(nil), tenants...)
	a.tenants.Store(&t)
}

// Tenants returns a copy of the table.
func (a *Auth) Tenants() []Tenant {
	return append([]Tenant(nil), (*a.tenants.Load())...)
}

// Authenticate returns the tenant whose token hash matches token's. Every
// tenant's hash is compared, in constant time, whatever matched: the
// time taken says nothing about which tenant, or how much of a hash,
// matched.
func (a *Auth) Authenticate(token string) (Tenant, bool) {
	if token == "" || len(token) > MaxTokenBytes {
		return Tenant{}, false
	}
	sum := sha256.Sum256([]byte(token))
	var (
		found Tenant
		hit   int
	)
	for _, t := range *a.tenants.Load() {
		if subtle.ConstantTimeCompare(sum[:], t.TokenSHA256[:]) == 1 {
			found, hit = t, 1
		}
	}
	return found, hit == 1
}

// WithAuth makes every endpoint but GET /healthz require a bearer token
// of one of a's tenants (Authorization: Bearer <token>). A missing or
// wrong token gets 401 with a body that never says which; on
// /v1/sessions the refusal is a refused frame. Admission is then per
// tenant (see WithAdmission). Without it, every request is the
// AnonymousTenant's.
func WithAuth(a *Auth) Option { return func(o *options) { o.mt.auth = a } }

// WithClientCertificates makes every endpoint but GET /healthz require a
// TLS client certificate that verified against the listener's client CAs
// (the daemon's --client-ca; set tls.VerifyClientCertIfGiven there, so
// health probes need none). It is checked before the bearer token.
func WithClientCertificates() Option { return func(o *options) { o.mt.clientCerts = true } }

// WithAdmission bounds the programs the server runs at once per language
// (maxRuns, 0 for no bound) and those waiting for a slot (queue); beyond
// both a request gets 429. The same figures are every tenant's default
// quota (see ParseAuthFile); a tenant's own quota applies on top, so one
// tenant at its quota gets 429 while others still run. Without it, only
// the runtimes' own admission applies.
func WithAdmission(maxRuns, queue int) Option {
	return func(o *options) { o.mt.maxRuns, o.mt.queue, o.mt.admission = maxRuns, queue, true }
}

// multiTenant is the configuration of tenants, authentication and
// admission.
type multiTenant struct {
	auth           *Auth
	clientCerts    bool
	admission      bool
	maxRuns, queue int
}

type tenantKey struct{}

// tenantOf is the tenant a request was authenticated as.
func tenantOf(ctx context.Context) Tenant {
	if t, ok := ctx.Value(tenantKey{}).(Tenant); ok {
		return t
	}
	return Tenant{Name: AnonymousTenant}
}

type authErrKey struct{}

// authFailure is why a request was not authenticated, for handlers that
// refuse in their own protocol (sessions); nil when it was.
func authFailure(ctx context.Context) *refusal {
	f, _ := ctx.Value(authErrKey{}).(*refusal)
	return f
}

// refusal is a request refused before it did anything: a status and the
// message the client gets.
type refusal struct {
	status     int
	msg        string
	retryAfter int64 // milliseconds, with 429
}

func (r *refusal) Error() string { return r.msg }

// unauthorized is the one message of every authentication failure.
var unauthorized = &refusal{status: http.StatusUnauthorized, msg: "unauthorized: send Authorization: Bearer <token> with a token this server knows"}

// gate runs in front of every endpoint: it refuses browser requests to
// endpoints that act, checks the client certificate and the bearer token,
// and puts the tenant in the request's context.
func (s *Server) gate(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" {
		s.mux.ServeHTTP(w, r)
		return
	}
	// A browser page may send requests to a daemon on this machine
	// (cross-site, or through DNS rebinding); browsers mark them with
	// Origin, which no API client sends.
	if r.Header.Get("Origin") != "" && (r.URL.Path == "/v1/run" || r.URL.Path == "/v1/sessions") {
		writeError(w, http.StatusForbidden, "requests from web pages are refused (this request carries an Origin header); call the API from a program")
		return
	}
	tenant, fail := s.authenticate(r)
	if fail != nil {
		s.metrics.authFailures.Inc()
		if r.URL.Path == "/v1/sessions" && isWebsocketUpgrade(r) {
			// The session refuses in its own protocol, after the upgrade.
			s.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), authErrKey{}, fail)))
			return
		}
		if fail.status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="dsh-container"`)
		}
		writeError(w, fail.status, fail.msg)
		return
	}
	if r.URL.Path == "/metrics" && s.opts.mt.auth != nil && !tenant.Metrics {
		writeError(w, http.StatusForbidden, fmt.Sprintf("tenant %q may not read metrics (set \"metrics\": true in the auth file)", tenant.Name))
		return
	}
	s.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tenantKey{}, tenant)))
}

// authenticate checks the client certificate and the bearer token.
func (s *Server) authenticate(r *http.Request) (Tenant, *refusal) {
	mt := s.opts.mt
	if mt.clientCerts && (r.TLS == nil || len(r.TLS.VerifiedChains) == 0) {
		return Tenant{}, unauthorized
	}
	if mt.auth == nil {
		return Tenant{Name: AnonymousTenant, MaxRuns: mt.maxRuns, Queue: mt.queue}, nil
	}
	token, ok := bearerToken(r.Header)
	if !ok {
		return Tenant{}, unauthorized
	}
	t, ok := mt.auth.Authenticate(token)
	if !ok {
		return Tenant{}, unauthorized
	}
	return t, nil
}

// bearerToken reads "Authorization: Bearer <token>" (the scheme in any
// case, one header only).
func bearerToken(h http.Header) (string, bool) {
	vals := h.Values("Authorization")
	if len(vals) != 1 {
		return "", false
	}
	scheme, token, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

func isWebsocketUpgrade(r *http.Request) bool {
	return headerHasToken(r.Header, "Connection", "upgrade") && headerHasToken(r.Header, "Upgrade", "websocket")
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, part := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(part), token) {
				return true
			}
		}
	}
	return false
}

// initTenants sets up admission and the intake and starts the per-tenant
// series at zero for the tenants known now.
func (s *Server) initTenants() {
	mt := s.opts.mt
	retryAfter := max(s.opts.retryAfter, time.Second).Milliseconds()
	s.admit = newAdmission(mt.maxRuns, mt.queue, retryAfter)
	// Without an auth file every request is the anonymous tenant's, with
	// the server's quota (authenticate).
	anonymous := &[]Tenant{{Name: AnonymousTenant, MaxRuns: mt.maxRuns, Queue: mt.queue}}
	table := func() *[]Tenant { return anonymous }
	if mt.auth != nil {
		table = mt.auth.tenants.Load
	}
	s.intake = newIntake(s.opts.maxRequest, s.opts.maxBody, retryAfter, table)
	var names []string
	for _, t := range *table() {
		names = append(names, t.Name)
	}
	for _, l := range s.langs {
		for _, n := range names {
			s.metrics.inFlight.WithLabelValues(l, n)
		}
	}
}
