package server

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/mlxcel/mlxcel/internal/engine"
)

// metrics are the server's Prometheus metrics (docs/metrics.md lists
// them). Each server has its own registry: tests run many servers in one
// process, and a global registry would refuse the second one.
//
// Cost model: request histograms and token counters are recorded once per
// finished request, from engine.Config.OnFinish; the step histogram once
// per engine step; gauges and engine counters are read from
// engine.Stats() when Prometheus scrapes. Nothing is recorded per token.
type metrics struct {
	reg *prometheus.Registry

	ttft       prometheus.Histogram
	decodeTokS prometheus.Histogram
	queue      prometheus.Histogram
	e2e        prometheus.Histogram
	itl        prometheus.Histogram
	step       *prometheus.HistogramVec // by kind: decode, prefill, mixed
	stepByKind map[string]prometheus.Observer
	stepSeqs   prometheus.Histogram

	requests     *prometheus.CounterVec
	promptTokens prometheus.Counter
	genTokens    prometheus.Counter
	cacheInfo    *prometheus.GaugeVec
	// writeStalls counts streams cut because the client stopped reading;
	// nonFinite requests failed by NaN or Inf logits.
	writeStalls prometheus.Counter
	nonFinite   prometheus.Counter
}

// Bucket boundaries. The TTFT and decode-rate ones are part of the
// contract (dashboards and docs/metrics.md quote them).
var (
	ttftBuckets       = []float64{5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000}
	decodeTokSBuckets = []float64{1, 5, 10, 25, 50, 75, 100, 150, 200, 300, 500, 1000}
	queueBuckets      = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}
	e2eBuckets        = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600}
	itlBuckets        = []float64{0.001, 0.0025, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2.5}
	stepBuckets       = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}
	stepSeqsBuckets   = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}
)

// Step kinds, the "kind" label of mlxcel_engine_step_duration_seconds.
var stepKinds = []string{"decode", "prefill", "mixed"}

func stepKind(s engine.StepStats) string {
	switch {
	case s.PrefillTokens == 0:
		return "decode"
	case s.DecodeTokens == 0:
		return "prefill"
	}
	return "mixed"
}

var allOutcomes = []string{"stop", "length", outcomeCancelled, outcomeError, outcomeRejected, outcomeInvalid}

func newMetrics(stats func() (engine.Stats, bool)) *metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	hist := func(name, help string, buckets []float64) prometheus.Histogram {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
		reg.MustRegister(h)
		return h
	}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		reg.MustRegister(c)
		return c
	}
	m := &metrics{
		reg:        reg,
		ttft:       hist("mlxcel_request_ttft_ms", "Time to first token per request, milliseconds (submit to first token, queueing included).", ttftBuckets),
		decodeTokS: hist("mlxcel_request_decode_tok_s", "Decode rate per request, tokens per second after the first token.", decodeTokSBuckets),
		queue:      hist("mlxcel_request_queue_time_seconds", "Time a request waited before first entering the batch, seconds.", queueBuckets),
		e2e:        hist("mlxcel_request_e2e_latency_seconds", "Request latency from submit to finish, seconds.", e2eBuckets),
		itl:        hist("mlxcel_request_inter_token_latency_seconds", "Mean time between output tokens per request (decode time / (generated-1)), seconds.", itlBuckets),
		step: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "mlxcel_engine_step_duration_seconds",
			Help:    "Duration of one engine step (schedule, forward, sample), seconds, by kind: decode (only decodes), prefill (only prompt tokens), mixed.",
			Buckets: stepBuckets}, []string{"kind"}),
		stepSeqs: hist("mlxcel_engine_step_sequences", "Sequences in one engine step (the batch size).", stepSeqsBuckets),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mlxcel_requests_total",
			Help: "Generation requests by outcome: stop, length, cancelled, error, rejected (429/503), invalid (other 4xx).",
		}, []string{"outcome"}),
		promptTokens: counter("mlxcel_prompt_tokens_total", "Prompt tokens of finished requests."),
		genTokens:    counter("mlxcel_generation_tokens_total", "Generated tokens of finished requests."),
		writeStalls:  counter("mlxcel_write_stalls_total", "Responses cut because the client stopped reading for the stall timeout (their requests cancelled)."),
		nonFinite:    counter("mlxcel_nonfinite_logits_total", "Requests failed because the model produced NaN or infinite logits."),
		cacheInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mlxcel_cache_config_info",
			Help: "KV cache configuration as labels (value 1), like vllm:cache_config_info.",
		}, []string{"block_size", "num_gpu_blocks"}),
	}
	reg.MustRegister(m.requests, m.cacheInfo, m.step)
	m.stepByKind = map[string]prometheus.Observer{}
	for _, k := range stepKinds {
		m.stepByKind[k] = m.step.WithLabelValues(k) // present at 0 from the start
	}
	for _, o := range allOutcomes {
		m.requests.WithLabelValues(o) // present at 0 from the start
	}

	gauge := func(name, help string, f func(engine.Stats) float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			st, _ := stats()
			return f(st)
		}))
	}
	gauge("mlxcel_num_requests_running", "Requests in the running batch.", func(s engine.Stats) float64 { return float64(s.Running) })
	gauge("mlxcel_num_requests_waiting", "Requests queued, not yet running.", func(s engine.Stats) float64 { return float64(s.Waiting) })
	gauge("mlxcel_batch_size", "Sequences in the last engine step (0 when idle).", func(s engine.Stats) float64 { return float64(s.BatchSize) })
	gauge("mlxcel_batch_tokens", "Tokens in the last engine step (0 when idle).", func(s engine.Stats) float64 { return float64(s.BatchTokens) })
	gauge("mlxcel_kv_cache_usage_ratio", "Fraction of KV cache blocks in use, 0 to 1.", func(s engine.Stats) float64 { return s.KVUsage })
	gauge("mlxcel_kv_cache_blocks_total", "KV cache blocks.", func(s engine.Stats) float64 { return float64(s.KVBlocksTotal) })
	gauge("mlxcel_model_loaded", "1 once the model is loaded and serving, 0 while loading.", func(engine.Stats) float64 {
		if _, ok := stats(); ok {
			return 1
		}
		return 0
	})

	engineCounter := func(name, help string, f func(engine.Stats) uint64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 {
			st, _ := stats()
			return float64(f(st))
		}))
	}
	engineCounter("mlxcel_engine_steps_total", "Engine steps (forward passes).", func(s engine.Stats) uint64 { return s.Steps })
	engineCounter("mlxcel_engine_prefill_tokens_total", "Prompt tokens processed by the engine (recomputed ones included).", func(s engine.Stats) uint64 { return s.PrefillTokens })
	engineCounter("mlxcel_engine_decode_tokens_total", "Decode tokens processed by the engine.", func(s engine.Stats) uint64 { return s.DecodeTokens })
	engineCounter("mlxcel_engine_run_ahead_steps_total", "Decode steps queued before the previous step's tokens were read (run-ahead).", func(s engine.Stats) uint64 { return s.RunAheadSteps })
	engineCounter("mlxcel_engine_run_ahead_sampled_steps_total", "Run-ahead steps that sampled on the device (temperature, top-p, ...).", func(s engine.Stats) uint64 { return s.RunAheadSampled })
	engineCounter("mlxcel_engine_preemptions_total", "Sequences preempted (KV freed, recomputed later) for lack of KV blocks.", func(s engine.Stats) uint64 { return s.Preemptions })
	// Like vllm:prefix_cache_queries/hits: their ratio is the hit rate.
	engineCounter("mlxcel_prefix_cache_query_tokens_total", "Prompt tokens of admitted sequences looked up in the prefix cache (re-admissions after preemption included).", func(s engine.Stats) uint64 { return s.PrefixCacheQueries })
	engineCounter("mlxcel_prefix_cache_hit_tokens_total", "Prompt tokens found in the prefix cache, whose KV was reused instead of computed.", func(s engine.Stats) uint64 { return s.PrefixCacheHits })
	engineCounter("mlxcel_prefix_cache_snapshots_total", "Slot-state snapshots saved for prefix caching (models with recurrent or ring layers).", func(s engine.Stats) uint64 { return s.SnapshotsSaved })
	engineCounter("mlxcel_prefix_cache_snapshot_failures_total", "Slot-state snapshots the backend failed to save (their prefixes are not cached).", func(s engine.Stats) uint64 { return s.SnapshotFailures })
	return m
}

// onFinish is engine.Config.OnFinish: once per finished request, on the
// engine goroutine, so it only does a few atomic adds.
func (m *metrics) onFinish(t engine.Timing, _ string) {
	m.queue.Observe(t.Queued.Seconds())
	m.e2e.Observe(t.Total.Seconds())
	m.promptTokens.Add(float64(t.PromptTokens))
	m.genTokens.Add(float64(t.GeneratedTokens))
	if t.GeneratedTokens > 0 && t.TTFT > 0 {
		m.ttft.Observe(float64(t.TTFT.Microseconds()) / 1e3)
	}
	if t.GeneratedTokens > 1 && t.Decode > 0 {
		m.decodeTokS.Observe(t.DecodeTokS)
		m.itl.Observe(t.Decode.Seconds() / float64(t.GeneratedTokens-1))
	}
}

// onStep is engine.Config.OnStep: once per step.
func (m *metrics) onStep(s engine.StepStats) {
	m.stepByKind[stepKind(s)].Observe(s.Duration.Seconds())
	m.stepSeqs.Observe(float64(s.Seqs))
}

func (m *metrics) setCacheInfo(c engine.Config) {
	m.cacheInfo.Reset()
	m.cacheInfo.WithLabelValues(strconv.Itoa(c.BlockSize), strconv.Itoa(c.NumBlocks)).Set(1)
}
