package container

// Outcome classification: how a run that did not finish by itself ended,
// from facts the program cannot forge, and the bounds on failure messages.
//
// A program that ends its own process before returning has not completed,
// whatever the status, 0 included: it is an exit, and its message states
// the status. The runner reports the exits it sees (process.exit,
// sys.exit, os._exit…) with an exit done frame, saying how and where
// (programExit); the ones it cannot see (a kill, posix._exit) end the
// container without a done, and the host reports the container's status
// (exitFailure). A program can forge the runner's frame only through the
// runner itself: the worst it does is report its own run as an exit.

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container/seccomp"
	"github.com/dsh-container/dsh-container/portproto"
)

// lostRunner classifies a broken bridge: a protocol violation, or the
// container dying (which is then reported by its exit status).
func (sb *sandbox) lostRunner(ctx context.Context, err error) *backend.Failure {
	if portproto.IsProtocolError(err) {
		return &backend.Failure{Kind: backend.FailureExit, Message: "runner broke protocol: " + err.Error()}
	}
	// The connection usually breaks because the container is exiting;
	// give its status a moment to arrive.
	t := time.NewTimer(sb.exitGrace)
	defer t.Stop()
	select {
	case st := <-sb.exit:
		return sb.exitFailure(st)
	case <-t.C:
	case <-ctx.Done():
		return abortFailure(ctx)
	}
	return &backend.Failure{Kind: backend.FailureExit, Message: fmt.Sprintf("the runner closed the bridge before the program returned, and the container's exit status did not arrive within %v: %v", sb.exitGrace, err)}
}

// exitGraceFor is how long a broken bridge waits for the container's exit
// status under an OCI runtime: 2s, and 10s under gVisor, whose sandbox
// reports its init's death only after tearing down its kernel (seconds on
// a loaded host). Either way the wait ends early with the status, and the
// run's own context bounds it.
func exitGraceFor(ociRuntime string) time.Duration {
	if seccomp.IsGVisor(ociRuntime) {
		return 10 * time.Second
	}
	return 2 * time.Second
}

// v8AbortStatus is a TypeScript runner's exit status when V8 aborts the
// process (SIGABRT through the init process: 128+6).
const v8AbortStatus = 134

// v8HeapNear is the container memory use, as a fraction of V8's heap
// limit, at or above which a V8 abort counts as heap exhaustion.
const v8HeapNear = 0.9

// exitFailure classifies the container's death from facts the program
// cannot forge by printing: the kernel's OOM kill, and for TypeScript,
// whose V8 heap is capped below the cgroup limit on purpose (v8HeapMiB),
// V8's abort status together with memory use the host measured near that
// cap. Nothing the program writes decides the kind.
func (sb *sandbox) exitFailure(st ExitStatus) *backend.Failure {
	if st.Code != 0 {
		// The runner's last output drains a moment after its exit
		// status arrives; keep it in the logs.
		drained := make(chan struct{})
		go func() {
			sb.readers.Wait()
			close(drained)
		}()
		t := time.NewTimer(time.Second)
		select {
		case <-drained:
		case <-t.C:
		}
		t.Stop()
	}
	if !st.OOMKilled && st.Code == v8AbortStatus && sb.lang == backend.TypeScript {
		// One last sample: the cgroup may still be there.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		sb.sampleMemory(ctx)
		cancel()
		heap := v8HeapMiB(sb.limits.MemoryBytes) << 20
		if peak := sb.peakMemory.Load(); float64(peak) >= v8HeapNear*float64(heap) {
			return &backend.Failure{Kind: backend.FailureOOM, Message: fmt.Sprintf("the program exceeded its memory limit of %d MiB (the JavaScript heap reached its %d MiB cap; the container peaked at %d MiB)",
				sb.limits.MemoryBytes>>20, heap>>20, peak>>20)}
		}
	}
	return exitFailure(st, sb.limits)
}

func exitFailure(st ExitStatus, l Limits) *backend.Failure {
	if st.OOMKilled {
		return &backend.Failure{Kind: backend.FailureOOM, Message: fmt.Sprintf("the program exceeded its memory limit of %d MiB", l.MemoryBytes>>20)}
	}
	msg := fmt.Sprintf("the container exited with status %d%s before the program returned", st.Code, signalNote(st.Code))
	if st.Err != nil {
		msg = "the container stopped before the program returned: " + st.Err.Error()
	}
	return &backend.Failure{Kind: backend.FailureExit, Message: msg}
}

// signalNote explains a status above 128 the way the container's init
// leaves it for a process a signal ended: " (128 + signal 9: killed)".
func signalNote(code int) string {
	if code <= 128 || code > 128+64 {
		return ""
	}
	sig := code - 128
	return fmt.Sprintf(" (128 + signal %d: %s)", sig, syscall.Signal(sig))
}

// programExit is the failure of a program that ended its own process
// before returning, as its runner reported it (a done frame with "exit"):
// the status first, then how (the error's message: "process.exit(0)",
// "SystemExit: bye") and where (its stack, without a first line that only
// repeats "Name: message").
func programExit(m *portproto.Done) *backend.Failure {
	msg := fmt.Sprintf("the program exited with status %d before returning", m.Exit.Status)
	if e := m.Error; e != nil {
		if e.Message != "" {
			msg += " (" + e.Message + ")"
		}
		stack, head := strings.TrimRight(e.Stack, "\n"), e.Name+": "+e.Message
		if stack == head {
			stack = ""
		} else if rest, ok := strings.CutPrefix(stack, head+"\n"); ok {
			stack = rest
		}
		if stack != "" {
			msg += "\n" + stack
		}
	}
	return &backend.Failure{Kind: backend.FailureExit, Message: cutMessage(msg)}
}

// maxFailureBytes caps the failure message a runner reports: it reaches
// the model like logs do, and must not bypass their cap.
const maxFailureBytes = 16 << 10

func describeError(e *portproto.ProgramError) string {
	msg := e.Stack
	switch {
	case msg != "":
	case e.Message == "":
		msg = e.Name
	default:
		msg = e.Name + ": " + e.Message
	}
	return cutMessage(msg)
}

// cutMessage cuts a message to maxFailureBytes on a rune boundary, saying
// how much was cut.
func cutMessage(msg string) string {
	if len(msg) <= maxFailureBytes {
		return msg
	}
	cut := maxFailureBytes
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + fmt.Sprintf("… (%d more bytes cut)", len(msg)-cut)
}
