package memplan

import (
	"fmt"
	"strings"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// Request is what a command will allocate: the engine's sizing flags.
type Request struct {
	CtxSize  int // --ctx-size (0: the model's context)
	Parallel int // --parallel slots (0: 1)
	// KVBlocks x BlockSize or KVMemMiB size the cache explicitly.
	KVBlocks, BlockSize, KVMemMiB int
	// DefaultPerSeq caps each slot's share of the default cache (the
	// server's 4096); 0 sizes every slot for the whole context, as the
	// engine does by default.
	DefaultPerSeq int
	PrefillChunk  int             // tokens a prefill step holds activations for (0: 512)
	KVDtype       backend.KVDtype // --kv-cache-dtype
	Skip          bool
}

// KVTokens is how many tokens of KV cache the request allocates for a
// model of modelCtx tokens with e's KV geometry, the way the server and
// the engine size the cache.
func (r Request) KVTokens(modelCtx int, e Estimate) int {
	ctx := modelCtx
	if r.CtxSize > 0 && (ctx <= 0 || r.CtxSize < ctx) {
		ctx = r.CtxSize
	}
	bs := r.BlockSize
	if bs <= 0 {
		bs = 16
	}
	roundUp := func(n int) int { return (n + bs - 1) / bs * bs }
	par := max(r.Parallel, 1)
	switch {
	case r.KVBlocks > 0:
		return r.KVBlocks * bs
	case r.KVMemMiB > 0:
		return e.KVTokensWithin(int64(r.KVMemMiB)<<20, par, bs)
	case r.DefaultPerSeq > 0:
		return roundUp(par * min(ctx, r.DefaultPerSeq))
	}
	return roundUp(ctx) * par
}

// Check stops a load that will not fit: the error gives the estimate's
// parts, what is free, and what to change. what names the model.
func Check(e Estimate, r Request, modelCtx int, what string) error {
	tokens, par := r.KVTokens(modelCtx, e), max(r.Parallel, 1)
	if r.Skip || e.Fits(tokens, par) {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "memory preflight: %s needs about %s (weights %s + KV cache %s for %d tokens%s + activations %s, with a %.0f%% margin) but %s is free (%s)",
		what, GiB(int64(float64(e.Need(tokens, par))*Margin)), GiB(e.WeightBytes()), GiB(e.KVBytes(tokens, par)), tokens,
		r.layout(modelCtx), GiB(e.ActBytes), (Margin-1)*100, GiB(e.Available), e.Source)
	if n := e.MaxTokens(par); n < 16 {
		b.WriteString("; the weights alone do not fit: use a smaller quantization (a 4-bit conversion holds about a quarter of bf16) or a device with more memory")
	} else {
		fmt.Fprintf(&b, "; about %d tokens of KV cache fit: lower --ctx-size or --parallel (their product is the cache), give --kv-mem, or use a smaller quantization", n)
	}
	b.WriteString("; --skip-mem-check loads anyway")
	return fmt.Errorf("%s", b.String())
}

// layout says where the token count came from.
func (r Request) layout(modelCtx int) string {
	switch {
	case r.KVBlocks > 0:
		return fmt.Sprintf(": --kv-blocks %d", r.KVBlocks)
	case r.KVMemMiB > 0:
		return fmt.Sprintf(": --kv-mem %d", r.KVMemMiB)
	}
	ctx := modelCtx
	if r.CtxSize > 0 && (ctx <= 0 || r.CtxSize < ctx) {
		ctx = r.CtxSize
	}
	if r.DefaultPerSeq > 0 && r.DefaultPerSeq < ctx {
		return fmt.Sprintf(": --parallel %d x %d", max(r.Parallel, 1), r.DefaultPerSeq)
	}
	return fmt.Sprintf(": --parallel %d x --ctx-size %d", max(r.Parallel, 1), ctx)
}
