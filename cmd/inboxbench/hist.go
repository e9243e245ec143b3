package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies are recorded in microseconds, 1 µs .. 10 min, 3 significant
// digits (0.1 % resolution): the whole range a storm can produce.
const (
	histMin = 1
	histMax = int64(10 * time.Minute / time.Microsecond)
	histSig = 3
)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(histMin, histMax, histSig) }

// record adds d (clamped into the histogram's range).
func record(h *hdrhistogram.Histogram, d time.Duration) {
	us := max(int64(d/time.Microsecond), histMin)
	_ = h.RecordValue(min(us, histMax))
}

// encodeHist is the histogram in the standard compressed HdrHistogram V2
// form (already base64), how workers hand latencies to the parent.
func encodeHist(h *hdrhistogram.Histogram) string {
	b, err := h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		return ""
	}
	return string(b)
}

// mergeHists decodes and merges encoded histograms.
func mergeHists(enc ...string) *hdrhistogram.Histogram {
	out := newHist()
	for _, e := range enc {
		if e == "" {
			continue
		}
		h, err := hdrhistogram.Decode([]byte(e))
		if err != nil {
			continue
		}
		out.Merge(h)
	}
	return out
}

// ms returns the value at quantile q (0..100) in milliseconds.
func ms(h *hdrhistogram.Histogram, q float64) float64 {
	if h.TotalCount() == 0 {
		return 0
	}
	return round3(float64(h.ValueAtQuantile(q)) / 1000)
}

func maxMs(h *hdrhistogram.Histogram) float64 {
	if h.TotalCount() == 0 {
		return 0
	}
	return round3(float64(h.Max()) / 1000)
}

func round3(f float64) float64 {
	return float64(int64(f*1000+0.5)) / 1000
}

// writeCDF writes h as a cumulative distribution, "ms<TAB>percent" per
// line, into --plot-data (docs/benchmarks plots are drawn from these).
func writeCDF(o *opts, name string, h *hdrhistogram.Histogram) {
	if o.plotDir == "" || h.TotalCount() == 0 {
		return
	}
	_ = os.MkdirAll(o.plotDir, 0o755)
	f, err := os.Create(filepath.Join(o.plotDir, name))
	if err != nil {
		logf(true, "plot data: %v", err)
		return
	}
	defer f.Close()
	fmt.Fprintln(f, "# ms\tpercent")
	qs := make([]float64, 0, 104)
	for q := 0; q < 100; q++ {
		qs = append(qs, float64(q))
	}
	qs = append(qs, 99.5, 99.9, 99.99, 100)
	for _, q := range qs {
		fmt.Fprintf(f, "%.3f\t%.2f\n", float64(h.ValueAtQuantile(q))/1000, q)
	}
}
