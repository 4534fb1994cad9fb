package main

import (
	"fmt"

	"github.com/mlxcel/mlxcel/internal/app"
	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/memplan"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// memoryEstimate is inspect's view of the loader's memory preflight.
type memoryEstimate struct {
	Backend     string `json:"backend"`
	WeightBytes int64  `json:"weight_bytes"`
	KVDtype     string `json:"kv_cache_dtype"` // --kv-cache-dtype (auto: the backend's own)
	KVPerToken  int64  `json:"kv_bytes_per_token"`
	KVPerSeq    int64  `json:"kv_bytes_per_sequence,omitempty"` // recurrent state of linear-attention layers
	KVBytes     int64  `json:"kv_bytes"`
	KVTokens    int    `json:"kv_tokens"`
	ActBytes    int64  `json:"activation_bytes"`
	NeedBytes   int64  `json:"need_bytes"` // with the margin
	FreeBytes   int64  `json:"free_bytes"` // -1: unknown
	FreeSource  string `json:"free_source,omitempty"`
	Fits        bool   `json:"fits"`
	Summary     string `json:"summary"`
}

// estimateMemory runs the same estimate `mlxcel run` and `serve` check
// before loading, on the named backend.
func estimateMemory(dir, backendName string, r memplan.Request) (*memoryEstimate, error) {
	cfg, err := weights.LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	be, err := backend.New(backendName, backend.Options{})
	if err != nil {
		return nil, err
	}
	defer be.Close()
	e, ctx := app.Estimate(cfg, dir, be, r)
	tokens, par := r.KVTokens(ctx, e), max(r.Parallel, 1)
	m := &memoryEstimate{Backend: be.Name(), KVDtype: r.KVDtype.String(), WeightBytes: e.WeightBytes(), KVPerToken: e.KVPerToken, KVPerSeq: e.KVPerSeq,
		KVBytes: e.KVBytes(tokens, par), KVTokens: tokens, ActBytes: e.ActBytes, NeedBytes: int64(float64(e.Need(tokens, par)) * memplan.Margin),
		FreeBytes: e.Available, FreeSource: e.Source, Fits: e.Fits(tokens, par)}
	dtype := "" // named when chosen
	if m.KVDtype != string(backend.KVAuto) {
		dtype = ", --kv-cache-dtype " + m.KVDtype
	}
	m.Summary = fmt.Sprintf("on %s: weights %s + KV %s (%d tokens, --parallel %d%s) + activations %s = %s with margin",
		m.Backend, memplan.GiB(m.WeightBytes), memplan.GiB(m.KVBytes), tokens, par, dtype,
		memplan.GiB(m.ActBytes), memplan.GiB(m.NeedBytes))
	switch {
	case e.Available < 0:
		m.Summary += "; free memory unknown"
	case m.Fits:
		m.Summary += fmt.Sprintf("; %s free (%s): fits", memplan.GiB(e.Available), e.Source)
	default:
		m.Summary += "\n              " + memplan.Check(e, r, ctx, "the model").Error()
	}
	return m, nil
}
