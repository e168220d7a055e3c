package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-container/dsh-container/registry"
	"github.com/dsh-container/dsh-container/server"
)

func TestParseMode(t *testing.T) {
	for _, c := range []struct {
		in          string
		allowNative bool
		want        registry.Mode
		err         string
	}{
		{"code", false, registry.ModeCode, ""},
		{"both", false, registry.ModeBoth, ""},
		{"native", true, registry.ModeNative, ""},
		{"native", false, "", "nothing to run"},
		{"", true, "", "use code, both or native"},
		{"Code", true, "", "use code, both or native"},
	} {
		got, err := parseMode(c.in, c.allowNative)
		if c.err != "" {
			var ue usageError
			if err == nil || !strings.Contains(err.Error(), c.err) || !asUsage(err, &ue) {
				t.Errorf("%q: %v, want a usage error containing %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: %q %v", c.in, got, err)
		}
	}
}

func asUsage(err error, ue *usageError) bool {
	u, ok := err.(usageError)
	*ue = u
	return ok
}

func TestLoopbackAddress(t *testing.T) {
	for in, want := range map[string]bool{
		"unix:///tmp/x.sock":   true,
		"tcp://127.0.0.1:80":   true,
		"tcp://[::1]:80":       true,
		"tcp://localhost:80":   true,
		"tcp://0.0.0.0:80":     false,
		"tcp://10.1.2.3:80":    false,
		"tcp://example.com:80": false,
	} {
		a, err := server.ParseAddress(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := loopbackAddress(a); got != want {
			t.Errorf("%s: %v, want %v", in, got, want)
		}
	}
}

// `mcp --mode native` needs no Docker: a go-sdk client over the command's
// own stdin and stdout lists the manifest's command tools and calls one;
// closing stdin ends the command with status 0.
func TestMCPCommandNative(t *testing.T) {
	manifest := write(t, "tools.json", `{"tools":[{"name":"shout","description":"Upper-case.","inputSchema":{"type":"object"},"command":["/bin/sh","-c","tr a-z A-Z"]}]}`)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var errb bytes.Buffer
	f := &factory{stdin: inR, stdout: outW, stderr: &errb}
	done := make(chan int, 1)
	go func() {
		code := f.main([]string{"mcp", "--mode", "native", "--tools", manifest})
		outW.Close()
		done <- code
	}()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test"}, nil).Connect(t.Context(), &sdk.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	list, err := cs.ListTools(t.Context(), nil)
	if err != nil || len(list.Tools) != 1 || list.Tools[0].Name != "shout" {
		t.Fatalf("tools/list: %v %+v", err, list)
	}
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "shout", Arguments: map[string]any{"a": "hi"}})
	if err != nil || res.IsError || res.Content[0].(*sdk.TextContent).Text != `{"A":"HI"}` {
		t.Fatalf("call: %v %+v", err, res)
	}
	cs.Close()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d\n%s", code, errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("mcp did not end when its input closed")
	}
	if !strings.Contains(errb.String(), "serving MCP on stdio") {
		t.Errorf("log:\n%s", errb.String())
	}
}
