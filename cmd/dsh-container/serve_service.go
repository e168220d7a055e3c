package main

// serve as a multi-tenant service: the auth file and its reload on
// SIGHUP, TLS and mTLS, the refusal to listen on a non-loopback address
// without authentication, and per-request limits on the container
// runtime.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"golang.org/x/net/netutil"

	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/server"
)

// serviceOptions are serve's flags of the service.
type serviceOptions struct {
	Auth           string
	TLSCert        string
	TLSKey         string
	ClientCA       string
	InsecureNoAuth bool
	MaxConnections int
}

// DefaultMaxConnections is serve's default cap on open connections:
// none. A global cap bounds the daemon's memory against a connection
// flood, but a flood that holds every slot (idle keep-alive connections
// live 2 minutes) also shuts out every tenant and the health probes, so
// it is the operator's choice (--max-connections), best with a front
// proxy limiting each source.
const DefaultMaxConnections = 0

func addServiceFlags(fl *pflag.FlagSet, o *serviceOptions) {
	fl.StringVar(&o.Auth, "auth", "", `tenants FILE: {"tenants":[{"name","tokenSha256","maxRuns"?,"queue"?}]}; every endpoint but /healthz then needs "Authorization: Bearer <token>"; SIGHUP reloads it`)
	fl.StringVar(&o.TLSCert, "tls-cert", "", "serve TLS with this PEM certificate (chain) FILE; needs --tls-key")
	fl.StringVar(&o.TLSKey, "tls-key", "", "PEM private key FILE of --tls-cert")
	fl.StringVar(&o.ClientCA, "client-ca", "", "PEM CA FILE: every endpoint but /healthz then needs a TLS client certificate it signed (mTLS; needs --tls-cert)")
	fl.BoolVar(&o.InsecureNoAuth, "insecure-no-auth", false, "allow a non-loopback --listen without --auth or --client-ca: anyone who reaches the port runs programs")
	fl.IntVar(&o.MaxConnections, "max-connections", DefaultMaxConnections, "connections open at once, authenticated or not (sessions and health probes included); past it new ones wait in the kernel's backlog until one closes, so a flood that holds every slot also shuts out tenants and probes: pair it with per-source limits in a front proxy (0: no limit)")
}

// limitConnections caps ln at --max-connections: a flood of connections,
// each a goroutine and buffers before authentication, cannot grow the
// daemon; the connections past the cap wait in the kernel's backlog.
func (o *serviceOptions) limitConnections(ln net.Listener) net.Listener {
	if o.MaxConnections == 0 {
		return ln
	}
	return netutil.LimitListener(ln, o.MaxConnections)
}

// service is what the flags set up.
type service struct {
	opts []server.Option
	auth *server.Auth
	// tls is the listener's configuration: each handshake takes cur, the
	// certificate, key and client CA last loaded (SIGHUP reloads them).
	tls *tls.Config
	cur atomic.Pointer[tls.Config]
}

// loadTLS reads --tls-cert, --tls-key and --client-ca into the
// configuration of a handshake.
func (o *serviceOptions) loadTLS() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(o.TLSCert, o.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert/--tls-key: %v", err)
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}}
	if o.ClientCA != "" {
		pem, err := os.ReadFile(o.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("--client-ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--client-ca %s: no PEM certificate in it", o.ClientCA)
		}
		c.ClientCAs = pool
		// Verified when given; required by the server on every endpoint
		// but /healthz, so health probes need no certificate.
		c.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return c, nil
}

// setup validates the service flags and loads the auth file and the
// certificates.
func (o *serviceOptions) setup(maxRuns, queue int) (*service, error) {
	if o.MaxConnections < 0 {
		return nil, usagef("--max-connections must not be negative (0: no limit)")
	}
	sv := &service{opts: []server.Option{server.WithAdmission(maxRuns, queue)}}
	if o.Auth != "" {
		a, err := server.LoadAuth(o.Auth, maxRuns, queue)
		if err != nil {
			return nil, usagef("--auth: %v", err)
		}
		sv.auth = a
		sv.opts = append(sv.opts, server.WithAuth(a))
	}
	if (o.TLSCert == "") != (o.TLSKey == "") {
		return nil, usagef("--tls-cert and --tls-key go together")
	}
	if o.ClientCA != "" && o.TLSCert == "" {
		return nil, usagef("--client-ca needs --tls-cert and --tls-key: client certificates are checked in the TLS handshake")
	}
	if o.TLSCert != "" {
		c, err := o.loadTLS()
		if err != nil {
			return nil, usageError{err}
		}
		sv.cur.Store(c)
		sv.tls = &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"},
			GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return sv.cur.Load(), nil }}
	}
	if o.ClientCA != "" {
		sv.opts = append(sv.opts, server.WithClientCertificates())
	}
	return sv, nil
}

// authenticated reports whether requests must authenticate.
func (o *serviceOptions) authenticated() bool { return o.Auth != "" || o.ClientCA != "" }

// checkListener refuses a non-loopback listener without authentication
// unless --insecure-no-auth.
func (o *serviceOptions) checkListener(ln net.Listener, log *slog.Logger) error {
	if server.Loopback(ln) || o.authenticated() {
		return nil
	}
	if !o.InsecureNoAuth {
		return usagef("refusing to listen on %s, a non-loopback address, without authentication: give --auth FILE (bearer-token tenants) or --client-ca (mTLS), or --insecure-no-auth to serve anyone who reaches the port", ln.Addr())
	}
	log.Warn("listening on a non-loopback address without authentication (--insecure-no-auth): anyone who can reach it runs programs with your tools", "addr", ln.Addr().String())
	return nil
}

// reloadOnHUP reloads the auth file and the TLS certificate, key and
// client CA on SIGHUP until ctx ends. Runs in flight keep their tenant,
// connections open keep their handshake; a bad file keeps what was
// loaded before (each of auth and TLS on its own). With neither SIGHUP is
// logged and ignored: a daemon must not die of the signal operators send
// to reload (a rotated certificate, as cert-manager writes it).
func (o *serviceOptions) reloadOnHUP(ctx context.Context, sv *service, maxRuns, queue int, log *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if sv.auth == nil && sv.tls == nil {
					log.Info("SIGHUP: no --auth file or TLS certificate to reload; ignored")
					continue
				}
				if sv.tls != nil {
					if c, err := o.loadTLS(); err != nil {
						log.Error("SIGHUP: TLS certificate not reloaded; the one loaded before stays", "err", err)
					} else {
						sv.cur.Store(c)
						attrs := []any{"cert", o.TLSCert}
						if leaf := c.Certificates[0].Leaf; leaf != nil {
							attrs = append(attrs, "not_after", leaf.NotAfter)
						}
						log.Info("SIGHUP: TLS certificate reloaded", attrs...)
					}
				}
				if sv.auth == nil {
					continue
				}
				if err := sv.auth.Reload(o.Auth, maxRuns, queue); err != nil {
					log.Error("SIGHUP: auth file not reloaded; the tenants stay as they were", "err", err)
					continue
				}
				log.Info("SIGHUP: auth file reloaded", "tenants", len(sv.auth.Tenants()))
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		<-done
	}
}

// checkAddress refuses, before anything starts, a --listen address that
// is plainly not loopback (an IP or an empty host) without
// authentication; checkListener decides for host names once resolved.
func (o *serviceOptions) checkAddress(a server.Address) error {
	if a.Network != "tcp" || o.authenticated() || o.InsecureNoAuth {
		return nil
	}
	host, _, err := net.SplitHostPort(a.Address)
	if err != nil {
		return nil // Listen reports it
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && !ip.IsLoopback()) {
		return usagef("refusing to listen on %s, a non-loopback address, without authentication: give --auth FILE (bearer-token tenants) or --client-ca (mTLS), or --insecure-no-auth to serve anyone who reaches the port", a)
	}
	return nil
}

// newServeHealthzCmd is `serve healthz`: a probe of a running daemon's
// GET /healthz for container healthchecks (the daemon image has no curl).
// Exit 0 when it answers 200, 1 otherwise.
func newServeHealthzCmd(f *factory) *cobra.Command {
	var (
		target   string
		insecure bool
		timeout  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "healthz [--url URL]",
		Short: "Probe a running daemon's GET /healthz (exit 0 when it answers 200)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			u, err := url.Parse(target)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return usagef("--url %q: want http(s)://HOST:PORT", target)
			}
			u.Path = "/healthz"
			hc := &http.Client{Timeout: timeout, Transport: &http.Transport{
				// A probe of the daemon on its own loopback: it sends
				// nothing secret and reads only the status.
				TLSClientConfig: &tls.Config{InsecureSkipVerify: insecure}, //nolint:gosec
			}}
			resp, err := hc.Get(u.String())
			if err != nil {
				return fmt.Errorf("healthz: %w", err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("healthz: %s: %s", resp.Status, strings.TrimSpace(string(body)))
			}
			fmt.Fprintln(f.stdout, strings.TrimSpace(string(body)))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&target, "url", "http://127.0.0.1:8080", "the daemon's base URL")
	fl.BoolVar(&insecure, "tls-insecure", false, "do not verify the daemon's certificate (a probe on its own loopback)")
	fl.DurationVar(&timeout, "timeout", 5*time.Second, "give up after this long")
	return cmd
}

// parseAllowRuntimes validates --allow-runtimes: names, each once.
func parseAllowRuntimes(names []string) ([]string, error) {
	var out []string
	for _, n := range names {
		n = strings.TrimSpace(n)
		switch {
		case n == "":
			return nil, usagef("--allow-runtimes: an empty runtime name (give names separated by commas, e.g. runc,runsc)")
		case len(n) > server.MaxRuntimeNameBytes:
			return nil, usagef("--allow-runtimes: runtime name %.20q... is longer than %d bytes", n, server.MaxRuntimeNameBytes)
		case slices.Contains(out, n):
			return nil, usagef("--allow-runtimes: %q is listed twice", n)
		}
		out = append(out, n)
	}
	return out, nil
}

// allowedRuntimes checks --runtime and --allow-runtimes against the OCI
// runtimes the engine has: the default's name (--runtime, else the
// engine's default), and the allowed runtimes other than it.
func allowedRuntimes(caps container.Capabilities, runtime string, allow []string) (string, []string, error) {
	def := runtime
	if def == "" {
		def = caps.DefaultRuntime
	}
	if len(allow) == 0 {
		return def, nil, nil
	}
	if def == "" {
		return "", nil, fmt.Errorf("--allow-runtimes: the %s engine names no default OCI runtime; give --runtime too", caps.Name)
	}
	var extra []string
	for _, n := range allow {
		if !slices.Contains(caps.Runtimes, n) {
			return "", nil, fmt.Errorf("--allow-runtimes: the %s engine has no OCI runtime %q (it has: %s); register it first (README: OCI runtimes)", caps.Name, n, strings.Join(caps.Runtimes, ", "))
		}
		if n != def {
			extra = append(extra, n)
		}
	}
	return def, extra, nil
}
