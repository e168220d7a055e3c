package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/dsh-container/dsh-container/backend/container"
)

func TestParseAllowRuntimes(t *testing.T) {
	got, err := parseAllowRuntimes([]string{"runc", " runsc "})
	if err != nil || !slices.Equal(got, []string{"runc", "runsc"}) {
		t.Errorf("runc, runsc: %q %v", got, err)
	}
	for in, want := range map[string]string{
		"runc,":                            "an empty runtime name",
		"runc,runc":                        `"runc" is listed twice`,
		"runc,x" + strings.Repeat("y", 70): "longer than 64 bytes",
	} {
		_, err := parseAllowRuntimes(strings.Split(in, ","))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
		if _, usage := err.(usageError); !usage {
			t.Errorf("%q: %T, want a usage error (exit 2)", in, err)
		}
	}
}

func TestAllowedRuntimes(t *testing.T) {
	caps := container.Capabilities{Name: "docker", Runtimes: []string{"io.containerd.runc.v2", "runc", "runsc"}, DefaultRuntime: "runc"}
	for _, c := range []struct {
		runtime string
		allow   []string
		def     string
		extra   []string
		err     string
	}{
		{"", nil, "runc", nil, ""},
		{"", []string{"runc", "runsc"}, "runc", []string{"runsc"}, ""},
		{"runsc", []string{"runc"}, "runsc", []string{"runc"}, ""},
		{"runsc", []string{"runsc"}, "runsc", nil, ""},
		{"", []string{"crun"}, "", nil, `the docker engine has no OCI runtime "crun" (it has: io.containerd.runc.v2, runc, runsc)`},
	} {
		def, extra, err := allowedRuntimes(caps, c.runtime, c.allow)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("--runtime %q --allow-runtimes %q: %v, want %q", c.runtime, c.allow, err, c.err)
			}
			continue
		}
		if err != nil || def != c.def || !slices.Equal(extra, c.extra) {
			t.Errorf("--runtime %q --allow-runtimes %q: %q %q %v, want %q %q", c.runtime, c.allow, def, extra, err, c.def, c.extra)
		}
	}
	if _, _, err := allowedRuntimes(container.Capabilities{Name: "x", Runtimes: []string{"runc"}}, "", []string{"runc"}); err == nil || !strings.Contains(err.Error(), "give --runtime too") {
		t.Errorf("no default: %v", err)
	}
}
