package backend

import (
	"encoding/json"
	"time"
)

// Report is a run's outcome as JSON: what `dsh-container run --json`
// prints, and the body of the daemon's run response. It is RunResult in the
// wire vocabulary of the rest of the project: camelCase keys, durations in
// milliseconds, value and logs never null.
type Report struct {
	Value          json.RawMessage `json:"value"`
	ValueKind      string          `json:"valueKind,omitempty"`
	Logs           []LogEntry      `json:"logs"`
	Error          *Failure        `json:"error"`
	LogsTruncated  bool            `json:"logsTruncated"`
	ValueTruncated bool            `json:"valueTruncated"`
	Stats          ReportStats     `json:"stats"`
}

// ReportStats are a run's measurements in milliseconds.
type ReportStats struct {
	WallMs    float64 `json:"wallMs"`
	CPUMs     float64 `json:"cpuMs"`
	StartupMs float64 `json:"startupMs"`
	Calls     int     `json:"calls"`
}

// NewReport renders a run result.
func NewReport(r *RunResult) Report {
	out := Report{
		Value: r.Value, ValueKind: string(r.ValueKind), Logs: r.Logs, Error: r.Error,
		LogsTruncated: r.LogsTruncated, ValueTruncated: r.ValueTruncated,
		Stats: ReportStats{WallMs: ms(r.Stats.Wall), CPUMs: ms(r.Stats.CPU), StartupMs: ms(r.Stats.Startup), Calls: r.Stats.Calls},
	}
	if out.Value == nil {
		out.Value = json.RawMessage("null")
	}
	if out.Logs == nil {
		out.Logs = []LogEntry{}
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
