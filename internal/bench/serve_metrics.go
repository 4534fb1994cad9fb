package bench

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// ServerTTFTMetric is the histogram our server (internal/server) exports
// for time to first token, one observation per finished request that
// generated a token; CheckServerCounts compares its _count delta with the
// requests a level completed.
const ServerTTFTMetric = "mlxcel_request_ttft_ms"

// Samples maps a series ("name{label=\"v\"}", histograms and summaries as
// name_count / name_sum) to its value.
type Samples map[string]float64

// scrapeMetrics reads a Prometheus text exposition and keeps the counters
// and histogram/summary count and sum of metrics whose name starts with
// prefix: the cumulative values whose deltas over a level mean something
// (gauges are instantaneous and would mislead as deltas).
func scrapeMetrics(ctx context.Context, hc *http.Client, url, apiKey, prefix string) (Samples, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", url, err)
	}
	out := Samples{}
	for name, f := range fams {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := labelString(m.GetLabel())
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[name+labels] += m.GetCounter().GetValue()
			case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
				out[name+"_count"+labels] += float64(m.GetHistogram().GetSampleCount())
				out[name+"_sum"+labels] += m.GetHistogram().GetSampleSum()
			case dto.MetricType_SUMMARY:
				out[name+"_count"+labels] += float64(m.GetSummary().GetSampleCount())
				out[name+"_sum"+labels] += m.GetSummary().GetSampleSum()
			}
		}
	}
	return out, nil
}

func labelString(ls []*dto.LabelPair) string {
	if len(ls) == 0 {
		return ""
	}
	parts := make([]string, 0, len(ls))
	for _, l := range ls {
		parts = append(parts, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

// delta is after - before for every series in after (a series new in
// after counts from zero).
func delta(before, after Samples) Samples {
	d := Samples{}
	for k, v := range after {
		d[k] = v - before[k]
	}
	return d
}

// seriesSum adds the values of every series of metric name (any labels).
func (s Samples) seriesSum(name string) (float64, bool) {
	var sum float64
	found := false
	for k, v := range s {
		if k == name || strings.HasPrefix(k, name+"{") {
			sum += v
			found = true
		}
	}
	return sum, found
}

// CheckServerCounts is the cross-check against our own server: every
// request the load generator completed must appear exactly once in the
// server's time-to-first-token histogram over the level. metric is the
// histogram's name (ServerTTFTMetric for mlxcel); the level must have
// been run with metrics scraping on.
func CheckServerCounts(l LevelResult, metric string) error {
	if l.Metrics == nil {
		return fmt.Errorf("concurrency %d: no metrics were scraped (run with --metrics)", l.Concurrency)
	}
	got, ok := l.Metrics.seriesSum(metric + "_count")
	if !ok {
		return fmt.Errorf("concurrency %d: the server exports no %s histogram", l.Concurrency, metric)
	}
	want := l.Requests - l.Errors
	if int(got) != want {
		return fmt.Errorf("concurrency %d: %s_count grew by %v, but %d requests completed", l.Concurrency, metric, got, want)
	}
	return nil
}
