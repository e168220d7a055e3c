// Command mcpupstream is the stdio MCP server the e2e tests give
// `dsh-container mcp` as an upstream: a small catalogue of items with a
// typed (output schema) listing, a tool that always fails, one that
// crashes the server mid-call, one whose schema rejects most arguments,
// and one reporting the server's pid.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type item struct {
	ID   int    `json:"id"`
	Name string `json:"name"`
}

type listIn struct {
	Prefix string `json:"prefix,omitempty" jsonschema:"only items whose name starts with this"`
}

type listOut struct {
	Items []item `json:"items"`
	Total int    `json:"total"`
}

type getIn struct {
	ID int `json:"id"`
}

type strictIn struct {
	N int `json:"n" jsonschema:"a whole number"`
}

var catalogue = []item{{1, "alpha"}, {2, "beta"}, {3, "gamma"}}

func main() {
	fmt.Fprintf(os.Stderr, "mcpupstream %d: starting\n", os.Getpid())
	s := mcp.NewServer(&mcp.Implementation{Name: "mcpupstream", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "list_items", Description: "List the catalogue's items.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in listIn) (*mcp.CallToolResult, listOut, error) {
			var out listOut
			for _, it := range catalogue {
				if strings.HasPrefix(it.Name, in.Prefix) {
					out.Items = append(out.Items, it)
				}
			}
			out.Total = len(out.Items)
			return nil, out, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "get_item", Description: "One item's name, as text."},
		func(_ context.Context, _ *mcp.CallToolRequest, in getIn) (*mcp.CallToolResult, any, error) {
			for _, it := range catalogue {
				if it.ID == in.ID {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: it.Name}}}, nil, nil
				}
			}
			return nil, nil, fmt.Errorf("no item %d", in.ID)
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails."},
		func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New("the upstream refuses: quota exceeded")
		})
	mcp.AddTool(s, &mcp.Tool{Name: "strict", Description: "Takes a whole number."},
		func(_ context.Context, _ *mcp.CallToolRequest, in strictIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strconv.Itoa(in.N * 2)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Crashes the server mid-call."},
		func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, "mcpupstream: segmentation fault (simulated)")
			os.Exit(139)
			return nil, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "pid", Description: "The server's process id, as the host sees it."},
		func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
			// The server runs in a PID namespace of its own; /proc is the
			// host's, so /proc/self names the host's pid.
			pid, err := os.Readlink("/proc/self")
			if err != nil {
				pid = strconv.Itoa(os.Getpid())
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: pid}}}, nil, nil
		})
	if len(os.Args) > 1 && os.Args[1] == "fail-at-start" {
		fmt.Fprintln(os.Stderr, "mcpupstream: cannot read /etc/catalogue.db: permission denied")
		os.Exit(2)
	}
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcpupstream:", err)
	}
}
