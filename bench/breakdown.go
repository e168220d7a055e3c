package bench

import (
	"fmt"
	"io"

	"github.com/dsh-container/dsh-container/backend"
)

// Breakdown is where a warm run's time goes, p50 of each phase in ms.
type Breakdown struct {
}

// breakdownRows prints language l's warm-run breakdown rows.
func breakdownRows(w io.Writer, r *Report, l backend.Language, row func(string, func(*DriverReport) Dist)) {
}

// issue17Ratios prints, per target, the binding round trip against its
// floors and warm TypeScript against warm Python, with issue 17's targets.
func issue17Ratios(w io.Writer, r *Report) {
	for _, d := range r.Drivers {
		for _, l := range backend.Languages() {
			lr, ok := d.Languages[string(l)]
			if !ok || lr.RawFloor.N == 0 {
				continue
			}
			f := lr.FloorRatios
			fmt.Fprintf(w, "%s %s round trip: p50 / raw socket floor %.2f (target ≤ 2: %s); p50 / library floor %.2f; p99 / p50 %.2f (target ≤ 4: %s)\n",
				d.Name, l, f.RoundTripOverRaw, verdict(f.RoundTripOverRaw <= 2), f.RoundTripOverLibrary, f.RoundTripP99OverP50, verdict(f.RoundTripP99OverP50 <= 4))
		}
		if d.Ratios.WarmTSOverWarmPy > 0 {
			fmt.Fprintf(w, "%s warm TS / warm Python %.2f (target ≤ 1.5: %s); warm TS / worker_threads %.2f (target ≤ 0.15: %s)\n",
				d.Name, d.Ratios.WarmTSOverWarmPy, verdict(d.Ratios.WarmTSOverWarmPy <= 1.5), d.Ratios.WarmTSOverWorker, verdict(d.Ratios.WarmTSOverWorker > 0 && d.Ratios.WarmTSOverWorker <= 0.15))
		}
	}
}
