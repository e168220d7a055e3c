package container

import (
	"slices"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
)

func TestParseUser(t *testing.T) {
	for u, want := range map[string][2]uint32{
		"65532:65532": {65532, 65532}, "0:0": {0, 0}, "1000:100": {1000, 100}, "4294967294:4294967294": {4294967294, 4294967294},
		"007:010": {7, 10},
	} {
		uid, gid, err := ParseUser(u)
		if err != nil || uid != want[0] || gid != want[1] {
			t.Errorf("ParseUser(%q) = %d, %d, %v; want %v", u, uid, gid, err, want)
		}
	}
	for _, u := range []string{
		"", "abc", "root", "0", "65532", "-1", "-1:-1", "4294967295:0", "0:4294967295", "4294967296", "4294967296:0",
		"99999999999:0", "1000:x", "x:1000", "1000:", ":1000", "+1:1", " 1:1", "1:1 ", "0x10:0", "1_000:0", "1:2:3", "root:root", "65532:65532\n",
	} {
		_, _, err := ParseUser(u)
		if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "numeric uid:gid") {
			t.Errorf("ParseUser(%q): %v, want InvalidArgument", u, err)
		}
	}
	if _, _, err := ParseUser(RunnerUser); err != nil {
		t.Errorf("the runner contract's user %q does not parse: %v", RunnerUser, err)
	}
}

// The labels the runtime sets and the reaper judges a container by,
// current and earlier, are reserved.
func TestReservedLabels(t *testing.T) {
	r := ReservedLabels()
	for _, k := range []string{LabelManaged, LabelOwner, LabelRun, LabelBridge, LabelLang, legacyLabelManaged, legacyLabelOwner, legacyLabelSockDir} {
		if !slices.Contains(r, k) {
			t.Errorf("%s is not reserved", k)
		}
	}
	if len(slices.Compact(slices.Sorted(slices.Values(r)))) != len(r) {
		t.Errorf("repeated: %v", r)
	}
}
