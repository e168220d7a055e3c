package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/dsh-container/dsh-container/policy"
)

// TestEgressOptions: the policy's egress section reaches the runtime
// through egress.New as it is (no copy here); a caFile that cannot be
// read is a usage error naming egress.caFile.
func TestEgressOptions(t *testing.T) {
	parse := func(s string) *policy.Policy {
		t.Helper()
		p, err := policy.Parse([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if opts, err := egressOptions(parse(`{"default":"allow"}`), nil); opts != nil || err != nil {
		t.Errorf("no egress section: %v, %v", opts, err)
	}
	if opts, err := egressOptions(parse(`{"egress":{"allow":["api.github.com:443"],"maxBytes":100}}`), nil); len(opts) != 1 || err != nil {
		t.Errorf("an egress section: %v, %v", opts, err)
	}
	_, err := egressOptions(parse(`{"egress":{"allow":["api.github.com:443"],"caFile":"/nonexistent/ca.pem"}}`), nil)
	var usage usageError
	if !errors.As(err, &usage) || !strings.Contains(err.Error(), "--policy: egress.caFile: open /nonexistent/ca.pem") {
		t.Errorf("a missing caFile: %v, want a usage error naming egress.caFile", err)
	}
}
