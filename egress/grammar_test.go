package egress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPatternGrammar is the one grammar of an allowlist entry, the
// policy file's and a request's alike. Before egress was one package the
// policy file had a grammar of its own; the rows marked "was" are where
// the two disagreed and the stricter answer was kept: the policy's for
// names a pattern must write as they match (upper case, a trailing dot,
// brackets, '_', '-' at a label's edge), this package's for names that
// look like addresses.
func TestPatternGrammar(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // the pattern as Allow reports it, or the refusal's substring after "!"
		was  string // where the policy file's grammar disagreed: "accepted" or "refused"
	}{
		{in: "api.github.com:443", want: "api.github.com:443"},
		{in: "*.example.com:443", want: "*.example.com:443"},
		{in: "localhost:8080", want: "localhost:8080"},
		{in: "xn--bcher-kva.example:443", want: "xn--bcher-kva.example:443"},
		{in: "a-b.example.com:443", want: "a-b.example.com:443"},
		{in: "API.github.com:443", want: "!only lower-case letters", was: "accepted by egress (lower-cased)"},
		{in: "*.Example.com:443", want: "!only lower-case letters", was: "accepted by egress (lower-cased)"},
		{in: "api.github.com.:443", want: "!ends with a dot", was: "accepted by egress (dot dropped)"},
		{in: "*.example.com.:443", want: "!ends with a dot", was: "accepted by egress (dot dropped)"},
		{in: "[api.github.com]:443", want: "!not a DNS name", was: "accepted by egress (brackets dropped)"},
		{in: "a_b.example.com:443", want: "!only lower-case letters", was: "accepted by egress"},
		{in: "-a.example.com:443", want: "!starting or ending with '-'", was: "accepted by egress"},
		{in: "a-.example.com:443", want: "!starting or ending with '-'", was: "accepted by egress"},
		{in: "foo.123:443", want: "!looks like an address", was: "accepted by the policy file"},
		{in: "1.2.3:443", want: "!looks like an address", was: "accepted by the policy file"},
		{in: "foo.0x7f:443", want: "!looks like an address", was: "accepted by the policy file"},
		{in: "api.github.com", want: "!want host:port"},
		{in: "a.com:", want: "!from 1 to 65535"},
		{in: "a.com:0", want: "!from 1 to 65535"},
		{in: "a.com:0443", want: "!from 1 to 65535"},
		{in: "a.com:+443", want: "!from 1 to 65535"},
		{in: "a.com:65536", want: "!from 1 to 65535"},
		{in: ":443", want: "!1..253 bytes"},
		{in: "a:b:443", want: "!not a DNS name"},
		{in: "a..b:443", want: "!labels must be 1..63"},
		{in: ".a.com:443", want: "!labels must be 1..63"},
		{in: "a b.com:443", want: "!not a DNS name"},
		{in: "é.com:443", want: "!not a DNS name"},
		{in: "10.0.0.1:443", want: "!IP address cannot be allowlisted"},
		{in: "1.2.3.4.:443", want: "!IP address cannot be allowlisted"},
		{in: "[::1]:443", want: "!IP address cannot be allowlisted"},
		{in: "[fe80::1%eth0]:443", want: "!IP address cannot be allowlisted"},
		{in: "*.10.0.0.1:443", want: "!IP address cannot be allowlisted"},
		{in: "*:443", want: "!whole first label"},
		{in: "*a.com:443", want: "!whole first label"},
		{in: "a.*.com:443", want: "!whole first label"},
		{in: "*.*.example.com:443", want: "!whole first label"},
		{in: "*.com:443", want: "!at least two labels"},
		{in: "*.localhost:443", want: "!at least two labels"},
	} {
		p, err := parsePattern(tc.in)
		if refusal, refused := strings.CutPrefix(tc.want, "!"); refused {
			if err == nil || !strings.Contains(err.Error(), refusal) {
				t.Errorf("parsePattern(%q) = %v, %v; want a refusal containing %q (before: %s)", tc.in, p, err, refusal, tc.was)
			}
			continue
		}
		if err != nil || p.String() != tc.want {
			t.Errorf("parsePattern(%q) = %v, %v; want %s", tc.in, p, err, tc.want)
		}
	}
}

func TestPrefixGrammar(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.0/8":    "10.0.0.0/8",
		"10.0.0.1/8":    "10.0.0.0/8",
		"10.1.2.3":      "10.1.2.3/32",
		"::1":           "::1/128",
		"0.0.0.0/0":     "0.0.0.0/0",
		"2001:db8::/32": "2001:db8::/32",
		// An IPv4-mapped address is the IPv4 address.
		"::ffff:10.0.0.1": "10.0.0.1/32",
		// The policy file's grammar took an IPv4-mapped CIDR, which then
		// never matched (addresses are unmapped before they are judged).
		"::ffff:10.0.0.0/104": "!IPv4 form",
		"10.0.0.0/33":         "!not a CIDR prefix",
		"nope":                "!not an IP address or CIDR prefix",
		" 10.0.0.1":           "!not an IP address",
		"010.0.0.1":           "!not an IP address",
	} {
		p, err := parsePrefix(in)
		if refusal, refused := strings.CutPrefix(want, "!"); refused {
			if err == nil || !strings.Contains(err.Error(), refusal) {
				t.Errorf("parsePrefix(%q) = %v, %v; want a refusal containing %q", in, p, err, refusal)
			}
			continue
		}
		if err != nil || p.String() != want {
			t.Errorf("parsePrefix(%q) = %v, %v; want %s", in, p, err, want)
		}
	}
}

// TestConfigErrorNamesEveryField: Validate and New report every problem,
// each under its field's path, so the policy file can say
// "egress.allow[1]".
func TestConfigErrorNamesEveryField(t *testing.T) {
	c := Config{Allow: []string{"a.example.com:443", "API.example.com:443"}, MaxBytes: -1, MaxConnections: -2, AllowPrivate: []string{"10.0.0.0/8", "x"}}
	for name, err := range map[string]error{"Validate": c.Validate(), "New": func() error { _, err := New(c); return err }()} {
		var ce *ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("%s: %v, want a *ConfigError wrapping ErrInvalidConfig", name, err)
		}
		var fields []string
		for _, p := range ce.Problems {
			fields = append(fields, p.Field)
		}
		if got := strings.Join(fields, " "); got != "allow[1] maxBytes maxConnections allowPrivate[1]" {
			t.Errorf("%s: fields %s", name, got)
		}
		if d := ce.Describe("egress."); !strings.HasPrefix(d, `egress.allow[1]: "API.example.com:443": `) || !strings.Contains(d, "; egress.maxBytes: must not be negative (0 means 10485760); ") {
			t.Errorf("%s: Describe = %s", name, d)
		}
	}
}

// TestCAFile: New reads the CA file (Validate does not), bounded, and
// names caFile in every refusal.
func TestCAFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(good, testCA(t), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{Allow: []string{"a.example.com:443"}, CAFile: good})
	if err != nil || !strings.Contains(p.CAPEM(), "BEGIN CERTIFICATE") {
		t.Fatalf("good CA file: %v", err)
	}
	big := filepath.Join(dir, "big.pem")
	_ = os.WriteFile(big, append(testCA(t), make([]byte, MaxCABytes)...), 0o600)
	notPEM := filepath.Join(dir, "not.pem")
	_ = os.WriteFile(notPEM, []byte("hello"), 0o600)
	for path, want := range map[string]string{
		filepath.Join(dir, "missing.pem"): "no such file",
		big:                               "larger than 65536 bytes",
		notPEM:                            "not a PEM bundle",
	} {
		c := Config{Allow: []string{"a.example.com:443"}, CAFile: path}
		if err := c.Validate(); err != nil {
			t.Errorf("Validate read %s: %v", path, err)
		}
		_, err := New(c)
		var ce *ConfigError
		if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].Field != "caFile" || !strings.Contains(ce.Problems[0].Reason, want) {
			t.Errorf("New with caFile %s: %v, want a caFile problem containing %q", path, err, want)
		}
	}
	if err := (Config{Allow: []string{"a.example.com:443"}, CAFile: good, CAPEM: string(testCA(t))}).Validate(); err == nil || !strings.Contains(err.Error(), "caFile: ") {
		t.Errorf("CAFile and CAPEM: %v", err)
	}
}

func testCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
