package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/dsh-container/dsh-container/policy"
	"github.com/dsh-container/dsh-container/registry"
)

const policyFlagUsage = `policy FILE, or "safe" (tools annotated destructiveHint ask): {"default":"allow|deny|ask","tools":{"NAME":{"action":"allow|deny|ask","when":[{"path":"a.b","equals"|"prefix"|"regex":...}]}},"egress":{...}} (docs/policy.md)`

// addPolicyFlags adds --policy and --approval-timeout.
func addPolicyFlags(fl *pflag.FlagSet, v *string, timeout *time.Duration) {
	fl.StringVar(v, "policy", "", policyFlagUsage)
	fl.DurationVar(timeout, "approval-timeout", registry.DefaultApprovalTimeout, "how long a call the policy asks about waits for a decision before it is denied (the program's wall-clock budget keeps running meanwhile)")
}

// loadPolicy reads --policy; "" is no policy (nil).
func loadPolicy(v string) (*policy.Policy, error) {
	if v == "" {
		return nil, nil
	}
	p, err := policy.Load(v)
	if err != nil {
		return nil, usagef("--policy: %v", err)
	}
	return p, nil
}

// approvalRegistryOptions is the registry options of a policy (its
// guard) and of the approval timeout.
func approvalRegistryOptions(p *policy.Policy, timeout time.Duration) []registry.Option {
	opts := []registry.Option{registry.WithApprovalTimeout(timeout)}
	if p != nil {
		opts = append(opts, registry.WithGuard(p.Guard()))
	}
	return opts
}

// openTTY opens the controlling terminal for --approve; tests replace it.
var openTTY = func() (io.ReadWriteCloser, error) {
	f, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	if _, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err != nil {
		f.Close()
		return nil, fmt.Errorf("/dev/tty is not a terminal: %w", err)
	}
	return f, nil
}

// ttyApprover asks on a terminal about each call a guard asks about, one
// question at a time. Tool names and arguments come from the model or its
// program: they are neutralised before they reach the terminal.
type ttyApprover struct {
	mu    sync.Mutex
	tty   io.ReadWriter
	once  sync.Once
	lines chan ttyLine
	done  chan struct{}
	close func() error
}

type ttyLine struct {
	s   string
	err error
}

// readLines is the one reader of the terminal: it ends at its first
// error (the terminal closes when the command exits).
func (a *ttyApprover) readLines() {
	in := bufio.NewReader(a.tty)
	for {
		s, err := in.ReadString('\n')
		select {
		case a.lines <- ttyLine{s, err}:
		case <-a.done:
			return
		}
		if err != nil {
			close(a.lines)
			return
		}
	}
}

// newTTYApprover opens the terminal; without one --approve is an error.
func newTTYApprover() (*ttyApprover, io.Closer, error) {
	tty, err := openTTY()
	if err != nil {
		return nil, nil, usagef("--approve prompts on a terminal, and there is none (%v); use --policy FILE to decide without asking", err)
	}
	a := &ttyApprover{tty: tty, lines: make(chan ttyLine), done: make(chan struct{})}
	a.close = sync.OnceValue(func() error {
		close(a.done)
		return tty.Close()
	})
	return a, a, nil
}

// Close closes the terminal and ends the reader.
func (a *ttyApprover) Close() error { return a.close() }

// askEverything is the guard of --approve without --policy: every tool
// call a program makes is asked about.
func askEverything(_ context.Context, exec registry.Execution) error {
	if exec.Name == registry.RunCode || exec.Name == registry.DescribeTools {
		return nil
	}
	return registry.Ask("--approve asks about every tool call")
}

// maxPromptArgs bounds the arguments shown in a prompt.
const maxPromptArgs = 2000

func (a *ttyApprover) Approve(ctx context.Context, req registry.ApprovalRequest) (registry.Approval, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.once.Do(func() { go a.readLines() })
	for drained := false; !drained; { // lines typed before the question are not answers
		select {
		case _, ok := <-a.lines:
			if !ok {
				return registry.Approval{}, fmt.Errorf("the terminal closed")
			}
		default:
			drained = true
		}
	}
	args := string(req.Exec.Arguments)
	if len(args) > maxPromptArgs {
		args = args[:maxPromptArgs] + fmt.Sprintf("… (%d bytes)", len(args))
	}
	// Arguments are one line of canonical JSON; neutralize keeps line
	// feeds, so escape them too: the prompt is exactly three lines.
	show := func(s string) string { return strings.ReplaceAll(neutralize(s), "\n", `\n`) }
	fmt.Fprintf(a.tty, "\ndsh-container: the program calls tool %s\n  arguments: %s\n  (%s)\nallow? [y]es / [n]o / [a]lways for this run: ",
		show(req.Exec.Name), show(args), show(req.Reason))
	var l ttyLine
	select {
	case got, ok := <-a.lines:
		if !ok {
			return registry.Approval{}, fmt.Errorf("the terminal closed")
		}
		l = got
	case <-ctx.Done():
		fmt.Fprintln(a.tty, "\n(no answer: denied)")
		return registry.Approval{}, context.Cause(ctx)
	}
	if l.err != nil && l.s == "" {
		return registry.Approval{}, fmt.Errorf("reading the answer: %w", l.err)
	}
	switch strings.ToLower(strings.TrimSpace(l.s)) {
	case "y", "yes":
		return registry.Approval{Decision: registry.DecisionAllow}, nil
	case "a", "always":
		return registry.Approval{Decision: registry.DecisionAllowForRun}, nil
	}
	return registry.Approval{Decision: registry.DecisionDeny, Reason: "denied at the terminal"}, nil
}

// runApprovalOptions is what --policy and --approve add to run's registry,
// the policy itself (nil without --policy; its Egress is for the run's
// egress option) and the closer of the terminal --approve opened.
func runApprovalOptions(opts *runOptions) (*policy.Policy, []registry.Option, func(), error) {
	p, err := loadPolicy(opts.Policy)
	if err != nil {
		return nil, nil, nil, err
	}
	if opts.ApprovalTimeout < 0 {
		return nil, nil, nil, usagef("--approval-timeout must not be negative")
	}
	regOpts := approvalRegistryOptions(p, opts.ApprovalTimeout)
	if !opts.Approve {
		return p, regOpts, func() {}, nil
	}
	a, c, err := newTTYApprover()
	if err != nil {
		return nil, nil, nil, err
	}
	if p == nil {
		regOpts = append(regOpts, registry.WithGuard(askEverything))
	}
	return p, append(regOpts, registry.WithApprover(a)), func() { c.Close() }, nil
}

// warnUnknownPolicyTools logs a warning for each tool the policy names
// that none of tools is (nor run_code, describe_tools): most likely a
// typo, whose rules would never apply. Under serve a session's client may
// still bring the tool, and the warning says so.
func warnUnknownPolicyTools(log *slog.Logger, p *policy.Policy, tools []registry.Tool, sessions bool) {
	if p == nil {
		return
	}
	known := map[string]bool{registry.RunCode: true, registry.DescribeTools: true}
	names := make([]string, 0, len(tools))
	for _, t := range tools {
		known[t.Name] = true
		names = append(names, t.Name)
	}
	for _, name := range slices.Sorted(maps.Keys(p.Tools)) {
		if known[name] {
			continue
		}
		msg := "the policy names a tool no tool source provides: its rules never apply"
		if sessions {
			msg = "the policy names a tool no tool source provides: its rules apply only to sessions whose client brings it"
		}
		shown := names
		if len(shown) > 20 {
			shown = append(shown[:20:20], fmt.Sprintf("… (%d more)", len(names)-20))
		}
		log.Warn(msg, "tool", name, "known", strings.Join(shown, ","))
	}
}
