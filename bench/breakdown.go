package bench

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
)

// Breakdown is where a warm run's time goes, each phase's distribution
// over the warm runs: from the host's timestamps (container.RunTrace) and
// the runner's own account in its done frame.
type Breakdown struct {
	// TypeStrip is the host's preparation: validation and, for
	// TypeScript, the type-strip in a worker process.
	TypeStrip Dist `json:"typeStrip"`
	// Acquire is taking a pooled sandbox (or starting one).
	Acquire Dist `json:"acquire"`
	// Send is from a sandbox in hand to the run frame queued (the CPU
	// baseline read, the frame built).
	Send Dist `json:"send"`
	// Compile is the runner's, from the run frame's arrival to a callable
	// program; Evaluate from calling it to its outcome; Render the done
	// frame built.
	Compile  Dist `json:"compile"`
	Evaluate Dist `json:"evaluate"`
	Render   Dist `json:"render"`
	// Return is the rest of the time from the run frame queued to the done
	// frame decoded: both frames' way through the writer, the socket and
	// the websocket libraries.
	Return Dist `json:"return"`
	// Settle is from the done frame to Run returning: bindings waited
	// for, the CPU meter stopped, logs taken.
	Settle Dist `json:"settle"`
	// RunnerReported counts the runs whose runner sent its timings.
	RunnerReported int `json:"runnerReported"`
}

// traces collects warm runs' traces.
type traces []*container.RunTrace

// timeTracedRun is timeRun with a trace of the run's phases.
func timeTracedRun(ctx context.Context, rt *container.Runtime, prog string, b []backend.BindingNamespace) (time.Duration, backend.RunResult, *container.RunTrace, error) {
	tr := &container.RunTrace{}
	d, res, err := timeRun(container.WithRunTrace(ctx, tr), rt, prog, b)
	return d, res, tr, err
}

func (ts traces) breakdown() *Breakdown {
	var strip, acquire, send, compile, eval, render, ret, settle []time.Duration
	n := 0
	for _, t := range ts {
		if t.Start.IsZero() || t.Returned.IsZero() || t.Done.IsZero() {
			continue
		}
		strip = append(strip, t.Prepared.Sub(t.Start))
		acquire = append(acquire, t.Acquired.Sub(t.Prepared))
		send = append(send, t.Sent.Sub(t.Acquired))
		inRunner := time.Duration(0)
		if r := t.Runner; r != nil {
			n++
			c, e, rd := time.Duration(r.Compile)*time.Microsecond, time.Duration(r.Evaluate)*time.Microsecond, time.Duration(r.Render)*time.Microsecond
			compile, eval, render = append(compile, c), append(eval, e), append(render, rd)
			inRunner = c + e + rd
		}
		ret = append(ret, max(0, t.Done.Sub(t.Sent)-inRunner))
		settle = append(settle, t.Returned.Sub(t.Done))
	}
	if len(strip) == 0 {
		return nil
	}
	return &Breakdown{TypeStrip: dist(strip), Acquire: dist(acquire), Send: dist(send), Compile: dist(compile), Evaluate: dist(eval), Render: dist(render), Return: dist(ret), Settle: dist(settle), RunnerReported: n}
}

func (b *Breakdown) String() string {
	if b == nil {
		return "no breakdown"
	}
	return fmt.Sprintf("type-strip %.3f, acquire %.3f, send %.3f, compile %.3f, evaluate %.3f, render %.3f, return %.3f, settle %.3f ms (p50; runner timings from %d runs)",
		b.TypeStrip.P50, b.Acquire.P50, b.Send.P50, b.Compile.P50, b.Evaluate.P50, b.Render.P50, b.Return.P50, b.Settle.P50, b.RunnerReported)
}

// breakdownRows prints language l's warm-run breakdown rows.
func breakdownRows(w io.Writer, r *Report, l backend.Language, row func(string, func(*DriverReport) Dist)) {
	has := false
	for _, d := range r.Drivers {
		has = has || d.Languages[string(l)].WarmBreakdown != nil
	}
	if !has {
		return
	}
	phase := func(name string, get func(*Breakdown) Dist) {
		row(string(l)+"   warm: "+name, func(d *DriverReport) Dist {
			if b := d.Languages[string(l)].WarmBreakdown; b != nil {
				return get(b)
			}
			return Dist{}
		})
	}
	phase("type-strip (host)", func(b *Breakdown) Dist { return b.TypeStrip })
	phase("acquire", func(b *Breakdown) Dist { return b.Acquire })
	phase("send", func(b *Breakdown) Dist { return b.Send })
	phase("compile (runner)", func(b *Breakdown) Dist { return b.Compile })
	phase("evaluate (runner)", func(b *Breakdown) Dist { return b.Evaluate })
	phase("render (runner)", func(b *Breakdown) Dist { return b.Render })
	phase("return (transit)", func(b *Breakdown) Dist { return b.Return })
	phase("settle", func(b *Breakdown) Dist { return b.Settle })
}
