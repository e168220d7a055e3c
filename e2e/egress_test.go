package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/egress"
)

// egressServer is a local HTTPS server with a certificate for
// api.egress.test signed by a test CA, listening on host loopback.
type egressServer struct {
	port  int
	caPEM string
	srv   *http.Server

	mu     sync.Mutex
	open   int // connections not yet closed
	served int // requests
}

func newEgressServer(t *testing.T) *egressServer {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "dsh-container egress test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "api.egress.test"},
		DNSNames:  []string{"api.egress.test", "private.egress.test", "other.egress.test", "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &egressServer{port: ln.Addr().(*net.TCPAddr).Port, caPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))}
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.served++
		s.mu.Unlock()
		fmt.Fprintf(w, "hello from %s", r.Host)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	mux.HandleFunc("/8mib", func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("y", 64<<10))
		for i := 0; i < 128; i++ {
			w.Write(chunk)
		}
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(strings.Repeat("x", 200<<10)))
	})
	mux.HandleFunc("/upload", func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.Copy(h, http.MaxBytesReader(w, r.Body, 4<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "%d %x", n, h.Sum(nil))
	})
	s.srv = &http.Server{
		Handler:   mux,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leafDER}, PrivateKey: key}}},
		ConnState: func(_ net.Conn, st http.ConnState) {
			s.mu.Lock()
			defer s.mu.Unlock()
			switch st {
			case http.StateNew:
				s.open++
			case http.StateClosed, http.StateHijacked:
				s.open--
			}
		},
	}
	go s.srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { s.srv.Close() })
	return s
}

// waitClosed waits until the server saw every connection close: the host
// closed its upstream ends.
func (s *egressServer) waitClosed(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		open := s.open
		s.mu.Unlock()
		if open == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connection(s) to the test server still open after the run", open)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testResolver maps the test names: api.egress.test to host loopback (the
// policy names 127.0.0.1 in allowPrivate), private.egress.test to a
// private address it does not name.
type testResolver struct{}

func (testResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	switch host {
	case "api.egress.test", "other.egress.test":
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	case "private.egress.test":
		return []netip.Addr{netip.MustParseAddr("10.0.0.7")}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

type egressEvents struct {
	mu     sync.Mutex
	events []egress.Event
}

func (l *egressEvents) add(e egress.Event) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *egressEvents) snapshot() []egress.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]egress.Event(nil), l.events...)
}

func egressPolicy(t *testing.T, s *egressServer, maxBytes int64, log *egressEvents) *egress.Policy {
	t.Helper()
	p, err := egress.New(egress.Config{
		Allow:        []string{fmt.Sprintf("api.egress.test:%d", s.port), fmt.Sprintf("private.egress.test:%d", s.port)},
		AllowPrivate: []string{"127.0.0.1"},
		MaxBytes:     maxBytes,
		CAPEM:        s.caPEM,
		Resolver:     testResolver{},
		OnEvent:      log.add,
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func egressPrograms(port int) (fetchOK, refused, capped map[backend.Language]string) {
	fetchOK = both(fmt.Sprintf(`
const r = await fetch("https://api.egress.test:%[1]d/hello");
const env = Object.keys(process.env).sort();
return { status: r.status, text: await r.text(), env };
`, port), fmt.Sprintf(`
import os, urllib.request
with urllib.request.urlopen("https://api.egress.test:%[1]d/hello", timeout=20) as r:
    return {"status": r.status, "text": r.read().decode(), "env": sorted(os.environ)}
`, port))
	refused = both(fmt.Sprintf(`
const net = await import("node:net");
const out = {};
for (const [k, url] of [["notListed", "https://other.egress.test:%[1]d/hello"], ["rawIP", "https://127.0.0.1:%[1]d/hello"], ["private", "https://private.egress.test:%[1]d/hello"], ["otherPort", "https://api.egress.test:4443/hello"]]) {
  try { const r = await fetch(url); out[k] = "reached: " + r.status; } catch (e) { out[k] = "refused: " + String(e.cause ?? e); }
}
for (const [k, host] of [["socketHost", "127.0.0.1"], ["socketPublic", "192.0.2.1"]]) {
  out[k] = await new Promise((resolve) => {
    const s = net.connect({ host, port: host === "192.0.2.1" ? 443 : %[1]d, timeout: 3000 });
    s.on("connect", () => { s.destroy(); resolve("connected"); });
    s.on("timeout", () => { s.destroy(); resolve("failed: timeout"); });
    s.on("error", (e) => resolve("failed: " + e.code));
  });
}
return out;
`, port), fmt.Sprintf(`
import socket, urllib.request
out = {}
for k, url in [("notListed", "https://other.egress.test:%[1]d/hello"), ("rawIP", "https://127.0.0.1:%[1]d/hello"), ("private", "https://private.egress.test:%[1]d/hello"), ("otherPort", "https://api.egress.test:4443/hello")]:
    try:
        with urllib.request.urlopen(url, timeout=20) as r:
            out[k] = f"reached: {r.status}"
    except Exception as e:
        out[k] = f"refused: {e}"
for k, host, port in [("socketHost", "127.0.0.1", %[1]d), ("socketPublic", "192.0.2.1", 443)]:
    try:
        socket.create_connection((host, port), timeout=3).close()
        out[k] = "connected"
    except OSError as e:
        out[k] = f"failed: {e}"
return out
`, port))
	capped = both(fmt.Sprintf(`
try {
  const r = await fetch("https://api.egress.test:%[1]d/big");
  const body = await r.text();
  return "read " + body.length;
} catch (e) {
  return "cut: " + String(e.cause ?? e);
}
`, port), fmt.Sprintf(`
import urllib.request
try:
    with urllib.request.urlopen("https://api.egress.test:%[1]d/big", timeout=20) as r:
        return f"read {len(r.read())}"
except Exception as e:
    return f"cut: {e!r}"
`, port))
	return
}

// uploadPrograms POST 1 MiB (byte i is i mod 251) to /upload, eight times
// the tunnel's 128 KiB stream window, and return the server's answer: the
// length and SHA-256 of what it received.
func uploadPrograms(port int) map[backend.Language]string {
	return both(fmt.Sprintf(`
const body = new Uint8Array(1 << 20);
for (let i = 0; i < body.length; i++) body[i] = i %% 251;
const r = await fetch("https://api.egress.test:%[1]d/upload", { method: "POST", body });
return { status: r.status, text: await r.text() };
`, port), fmt.Sprintf(`
import urllib.request
body = bytes(i %% 251 for i in range(1 << 20))
req = urllib.request.Request("https://api.egress.test:%[1]d/upload", data=body, method="POST")
with urllib.request.urlopen(req, timeout=60) as r:
    return {"status": r.status, "text": r.read().decode()}
`, port))
}

func uploadAnswer() string {
	body := make([]byte, 1<<20)
	for i := range body {
		body[i] = byte(i % 251)
	}
	return fmt.Sprintf("%d %x", len(body), sha256.Sum256(body))
}

// TestEgress: a program reaches an allowlisted name through the runner's
// loopback proxy and the host's CONNECT proxy, TLS verified against a test
// CA carried by the run frame, while the container keeps network none; it
// is refused a name not on the list, a raw IP, a name resolving to a
// private address, a port not on the list, a direct socket and traffic
// over the byte cap; nothing is left after any case.
func TestEgress(t *testing.T) {
	if unavailable != nil {
		t.Skip(unavailable)
	}
	srv := newEgressServer(t)
	fetchOK, refused, capped := egressPrograms(srv.port)
	upload := uploadPrograms(srv.port)
	underEachRuntime(t, func(t *testing.T, ociRuntime string) {
		var rtOpts []container.Option
		if ociRuntime != "" {
			rtOpts = append(rtOpts, container.WithOCIRuntime(ociRuntime))
		}
		for _, lang := range langs {
			t.Run(string(lang), func(t *testing.T) {
				for _, pooled := range []bool{false, true} {
					name := "cold"
					opts := slices.Clone(rtOpts)
					if pooled {
						name = "pooled"
						opts = append(opts, container.WithPool(1))
					}
					t.Run(name, func(t *testing.T) {
						log := &egressEvents{}
						e := newEnv(t, lang, nil, append(opts, container.WithEgress(egressPolicy(t, srv, 0, log)))...)
						if pooled {
							waitEgressPool(t, e.rt)
						}
						res, err := e.rt.Run(context.Background(), backend.RunRequest{Program: fetchOK[lang]})
						if err != nil {
							t.Fatal(err)
						}
						outcome(t, lang, res, "fetch through egress")
						got := decode[struct {
							Status int
							Text   string
							Env    []string
						}](t, res)
						if got.Status != 200 || got.Text != fmt.Sprintf("hello from api.egress.test:%d", srv.port) {
							t.Fatalf("got %+v", got)
						}
						if pooled && !res.Stats.Warm {
							t.Fatal("the pooled case ran cold")
						}
						for _, k := range []string{"HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"} {
							if !containsString(got.Env, k) {
								t.Fatalf("env %v lacks %s", got.Env, k)
							}
						}
						srv.waitClosed(t)
						evs := log.snapshot()
						if len(evs) != 1 || evs[0].Outcome != egress.OutcomeOK || evs[0].Host != "api.egress.test" || evs[0].Address != "127.0.0.1" || evs[0].BytesUp == 0 || evs[0].BytesDown == 0 {
							t.Fatalf("events %+v", evs)
						}
						t.Logf("egress event: %+v", evs[0])
					})
				}
				t.Run("without egress", func(t *testing.T) {
					e := newEnv(t, lang, nil, rtOpts...)
					res := e.run(t, map[backend.Language]string{
						backend.TypeScript: `return Object.keys(process.env).sort();`,
						backend.Python:     "import os\nreturn sorted(os.environ)",
					}[lang])
					wantValue(t, res, `["HOME","LANG","PATH"]`)
				})
				t.Run("refused", func(t *testing.T) {
					log := &egressEvents{}
					e := newEnv(t, lang, nil, append(slices.Clone(rtOpts), container.WithEgress(egressPolicy(t, srv, 0, log)))...)
					res, err := e.rt.Run(context.Background(), backend.RunRequest{Program: refused[lang]})
					if err != nil {
						t.Fatal(err)
					}
					outcome(t, lang, res, "refused cases")
					got := decode[map[string]string](t, res)
					t.Logf("%+v", got)
					for _, k := range []string{"notListed", "rawIP", "private", "otherPort"} {
						if !strings.HasPrefix(got[k], "refused: ") {
							t.Errorf("%s: %q, want refused", k, got[k])
						}
					}
					for _, k := range []string{"socketHost", "socketPublic"} {
						if !strings.HasPrefix(got[k], "failed: ") {
							t.Errorf("%s: %q, want a failed socket", k, got[k])
						}
					}
					if lang == backend.TypeScript {
						// undici hides the proxy's answer: the runner logs it.
						var logs []string
						for _, l := range res.Logs {
							logs = append(logs, l.Text)
						}
						for _, want := range []string{"not on the egress allowlist", "raw IP", "private address"} {
							if !strings.Contains(strings.Join(logs, "\n"), "egress refused: ") || !strings.Contains(strings.Join(logs, "\n"), want) {
								t.Errorf("logs %q lack %q", logs, want)
							}
						}
					}
					if lang == backend.Python {
						for k, want := range map[string]string{"notListed": "not on the egress allowlist", "rawIP": "raw IP", "private": "private address"} {
							if !strings.Contains(got[k], want) {
								t.Errorf("%s: %q lacks %q", k, got[k], want)
							}
						}
					}
					evs := log.snapshot()
					reasons := map[string]bool{}
					for _, ev := range evs {
						if ev.Outcome != egress.OutcomeRefused {
							t.Errorf("event %+v, want refused", ev)
						}
						for _, w := range []string{"not on the egress allowlist", "raw IP", "10.0.0.7, a private address"} {
							if strings.Contains(ev.Reason, w) {
								reasons[w] = true
							}
						}
					}
					if len(reasons) != 3 {
						t.Errorf("events %+v lack a refusal reason (%v)", evs, reasons)
					}
					srv.waitClosed(t)
				})
				t.Run("abort while connected", func(t *testing.T) {
					log := &egressEvents{}
					e := newEnv(t, lang, nil, append(slices.Clone(rtOpts), container.WithEgress(egressPolicy(t, srv, 0, log)))...)
					prog := map[backend.Language]string{
						backend.TypeScript: fmt.Sprintf(`const r = await fetch("https://api.egress.test:%d/slow"); await r.text(); return "done";`, srv.port),
						backend.Python:     fmt.Sprintf("import urllib.request\nwith urllib.request.urlopen(\"https://api.egress.test:%d/slow\", timeout=60) as r:\n    r.read()\nreturn 'done'", srv.port),
					}[lang]
					ctx, cancel := context.WithCancel(context.Background())
					go func() {
						// Cancel once the connection is up.
						for ctx.Err() == nil {
							srv.mu.Lock()
							open := srv.open
							srv.mu.Unlock()
							if open > 0 {
								time.Sleep(200 * time.Millisecond)
								cancel()
								return
							}
							time.Sleep(20 * time.Millisecond)
						}
					}()
					res, err := e.rt.Run(ctx, backend.RunRequest{Program: prog})
					cancel()
					if err != nil {
						t.Fatal(err)
					}
					outcome(t, lang, res, "abort while connected")
					wantFailure(t, res, backend.FailureAbort)
					srv.waitClosed(t)
					if evs := log.snapshot(); len(evs) != 1 || evs[0].Address != "127.0.0.1" {
						t.Fatalf("events %+v", evs)
					}
				})
				t.Run("byte cap", func(t *testing.T) {
					log := &egressEvents{}
					e := newEnv(t, lang, nil, append(slices.Clone(rtOpts), container.WithEgress(egressPolicy(t, srv, 32<<10, log)))...)
					res, err := e.rt.Run(context.Background(), backend.RunRequest{Program: capped[lang]})
					if err != nil {
						t.Fatal(err)
					}
					outcome(t, lang, res, "byte cap")
					got := decode[string](t, res)
					t.Logf("%s", got)
					if !strings.HasPrefix(got, "cut: ") {
						t.Fatalf("got %q, want the response cut", got)
					}
					srv.waitClosed(t)
					evs := log.snapshot()
					if len(evs) != 1 || evs[0].Outcome != egress.OutcomeCapped || evs[0].BytesUp+evs[0].BytesDown != 32<<10 {
						t.Fatalf("events %+v", evs)
					}
				})
				t.Run("upload beyond the window", func(t *testing.T) {
					log := &egressEvents{}
					e := newEnv(t, lang, nil, append(slices.Clone(rtOpts), container.WithEgress(egressPolicy(t, srv, 0, log)))...)
					res, err := e.rt.Run(context.Background(), backend.RunRequest{Program: upload[lang]})
					if err != nil {
						t.Fatal(err)
					}
					outcome(t, lang, res, "upload")
					got := decode[struct {
						Status int
						Text   string
					}](t, res)
					if want := uploadAnswer(); got.Status != 200 || got.Text != want {
						t.Fatalf("got %+v, want 200 %q", got, want)
					}
					srv.waitClosed(t)
					evs := log.snapshot()
					if len(evs) != 1 || evs[0].Outcome != egress.OutcomeOK || evs[0].BytesUp < 1<<20 {
						t.Fatalf("events %+v", evs)
					}
				})
			})
		}
	})
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func waitEgressPool(t *testing.T, rt *container.Runtime) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for rt.PoolIdle() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the warm pool did not fill")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestEgressThroughput measures one 8 MiB download through the tunnel
// (runner proxy, bridge stream, host proxy, TLS) in each language.
func TestEgressThroughput(t *testing.T) {
	if unavailable != nil {
		t.Skip(unavailable)
	}
	srv := newEgressServer(t)
	for _, lang := range langs {
		t.Run(string(lang), func(t *testing.T) {
			log := &egressEvents{}
			e := newEnv(t, lang, nil, container.WithEgress(egressPolicy(t, srv, 0, log)))
			prog := map[backend.Language]string{
				backend.TypeScript: fmt.Sprintf(`const t0 = performance.now(); const r = await fetch("https://api.egress.test:%d/8mib"); const b = await r.arrayBuffer(); return { bytes: b.byteLength, ms: performance.now() - t0 };`, srv.port),
				backend.Python:     fmt.Sprintf("import time, urllib.request\nt0 = time.monotonic()\nwith urllib.request.urlopen(\"https://api.egress.test:%d/8mib\", timeout=60) as r:\n    n = len(r.read())\nreturn {\"bytes\": n, \"ms\": (time.monotonic() - t0) * 1000}", srv.port),
			}[lang]
			res, err := e.rt.Run(context.Background(), backend.RunRequest{Program: prog})
			if err != nil {
				t.Fatal(err)
			}
			got := decode[struct {
				Bytes int
				Ms    float64
			}](t, res)
			if got.Bytes != 8<<20 {
				t.Fatalf("read %d bytes", got.Bytes)
			}
			t.Logf("EGRESS %s: 8 MiB in %.0f ms = %.1f MiB/s (run wall %v, cpu %v)", lang, got.Ms, 8/(got.Ms/1000), res.Stats.Wall.Round(time.Millisecond), res.Stats.CPU.Round(time.Millisecond))
			srv.waitClosed(t)
		})
	}
}
