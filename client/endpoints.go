package client

// Several endpoints, and the retries of a run no daemon accepted.
//
// A run may be retried only while no daemon has accepted it: after a
// refusal (429 at capacity, 503 shutting down or unable to run programs,
// as the daemon or a load balancer in front of it says; a balancer's 502
// or 504 to the upgrade) or a connection that failed before the accepted
// frame. Each retry goes to the next
// endpoint, after a jittered exponential backoff, and never before the
// Retry-After that endpoint gave. Once a daemon has sent accepted, the run
// is that daemon's whatever follows: a connection lost then is
// ErrNodeLost, a refusal or a frame out of order a *ProtocolError, and
// neither is retried.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// New returns a client of the daemons at endpoints (each http://host:port,
// https://host:port or unix:///path): a run goes to one of them, and to
// the next when one refuses it with 429 or 503 or cannot be reached before
// accepting it. Set Token, TLS and the retry bounds on the result.
func New(endpoints ...string) (*Client, error) {
	c := &Client{Endpoints: endpoints}
	if _, err := c.endpoints(); err != nil {
		return nil, err
	}
	return c, nil
}

// notAccepted marks a failure before any daemon accepted the run: nothing
// ran, and the run may go elsewhere.
type notAccepted struct{ err error }

func (e notAccepted) Error() string { return e.err.Error() }
func (e notAccepted) Unwrap() error { return e.err }

// endpoints lists URL and Endpoints, checked, without repeats.
func (c *Client) endpoints() ([]string, error) {
	var out []string
	for _, e := range append([]string{c.URL}, c.Endpoints...) {
		if e == "" {
			continue
		}
		u, err := url.Parse(e)
		if err != nil {
			return nil, fmt.Errorf("client: endpoint %q: %v", e, err)
		}
		switch u.Scheme {
		case "http", "https":
			if u.Host == "" {
				return nil, fmt.Errorf("client: endpoint %q has no host", e)
			}
		case "unix":
			if u.Path == "" {
				return nil, fmt.Errorf("client: endpoint %q has no socket path", e)
			}
		default:
			return nil, fmt.Errorf("client: endpoint %q: the scheme must be http, https or unix", e)
		}
		dup := false
		for _, o := range out {
			dup = dup || o == e
		}
		if !dup {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("client: no endpoint: set URL or Endpoints")
	}
	return out, nil
}

// retryable says whether err leaves the run free to go elsewhere, and how
// long its endpoint asked to be left alone.
func retryable(err error) (time.Duration, bool) {
	var rf *RefusedError
	if errors.As(err, &rf) {
		switch rf.Status {
		case http.StatusTooManyRequests, http.StatusServiceUnavailable:
			return rf.RetryAfter, true
		case http.StatusBadGateway, http.StatusGatewayTimeout:
			// A load balancer's answer to the upgrade: the start frame
			// was never sent, so nothing can have run.
			return rf.RetryAfter, true
		}
		return 0, false
	}
	var na notAccepted
	return 0, errors.As(err, &na) && !errors.Is(err, ErrNodeLost) && !tlsRefused(err)
}

// tlsRefused is a TLS handshake that failed on trust, not reachability: a
// certificate this client does not accept, or an alert from a daemon that
// does not accept this client's. Another attempt would fail alike.
func tlsRefused(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		alert    tls.AlertError
		record   tls.RecordHeaderError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		op       *net.OpError
	)
	// An alert received over TCP is a net.OpError "remote error".
	return errors.As(err, &verify) || errors.As(err, &alert) || errors.As(err, &record) ||
		errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid) ||
		errors.As(err, &op) && op.Op == "remote error"
}

// runRetrying runs req on one endpoint after another until one accepts it
// or a failure is not retryable or the retries are spent.
func (c *Client) runRetrying(ctx context.Context, req Request, tools []Tool, byName map[string]Tool, h Handlers) (*Report, error) {
	eps, err := c.endpoints()
	if err != nil {
		return nil, err
	}
	retries := c.MaxRetries
	if retries == 0 {
		retries = max(3, 2*len(eps))
	}
	maxWait := c.MaxRetryWait
	if maxWait <= 0 {
		maxWait = 30 * time.Second
	}
	base := c.RetryBackoff
	if base <= 0 {
		base = 100 * time.Millisecond
	}
	// notBefore[i] is when endpoint i may be tried again (its Retry-After).
	notBefore := make([]time.Time, len(eps))
	next := rand.IntN(len(eps))
	for attempt := 0; ; attempt++ {
		i := pickEndpoint(notBefore, next)
		if attempt > 0 {
			wait := min(max(jitter(base<<min(attempt-1, 20)), time.Until(notBefore[i])), maxWait)
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
		}
		one := *c
		one.URL = eps[i]
		rep, accepted, err := one.runOnce(ctx, req, tools, byName, h)
		if accepted {
			// The run is that daemon's, whatever followed its accepted
			// (a refusal, an error, a broken connection): at most once.
			return rep, err
		}
		after, ok := retryable(err)
		if !ok || attempt >= retries || ctx.Err() != nil {
			return rep, err
		}
		if after > 0 {
			// Many clients told the same Retry-After must not return at once.
			after += time.Duration(rand.Int64N(int64(after)/5 + 1))
		}
		notBefore[i] = time.Now().Add(max(after, base))
		if c.OnRetry != nil {
			c.OnRetry(eps[i], err)
		}
		next = (i + 1) % len(eps)
	}
}

// pickEndpoint is the first endpoint from next on (in turn) that may be
// tried now, or else the one free soonest.
func pickEndpoint(notBefore []time.Time, next int) int {
	now := time.Now()
	best := next
	for k := range notBefore {
		i := (next + k) % len(notBefore)
		if !notBefore[i].After(now) {
			return i
		}
		if notBefore[i].Before(notBefore[best]) {
			best = i
		}
	}
	return best
}

// jitter is d spread over [d/2, d].
func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// parseRetryAfter reads a Retry-After header: seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(v); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(min(secs, 86400)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), 24*time.Hour)
	}
	return 0
}
