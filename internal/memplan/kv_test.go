package memplan

import (
	"runtime"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/backend/cpu"
	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/profiles"
	"github.com/mlxcel/mlxcel/internal/weights"
)

// allocated is what the CPU backend's NewKVStore takes from the heap for
// the store the engine would ask for.
func allocated(t *testing.T, be *cpu.Backend, e Estimate, tokens, seqs int) int64 {
	t.Helper()
	spec := engine.KVSpec(be, engine.Config{NumBlocks: tokens / 16, BlockSize: 16, Parallel: seqs, PrefillChunk: e.chunk, KVDtype: e.dtype}, e.layers)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	kv, err := be.NewKVStore(spec)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	runtime.KeepAlive(kv)
	return int64(after.TotalAlloc - before.TotalAlloc)
}

// The estimate's KV bytes are what the CPU backend allocates for the
// fixtures' stores: recurrent state per slot (Qwen3.5), nothing for
// KV-shared layers (Gemma 4 E), sliding-window rings once the cache is
// long enough for the engine to pick them (gpt-oss, Gemma 4 E), at each
// --kv-cache-dtype.
func TestKVBytesAreAllocated(t *testing.T) {
	be := cpu.New(1)
	for _, name := range []string{"qwen3_5_text-bf16", "qwen3_5_moe_text-bf16", "gemma4_e-bf16", "gpt_oss-bf16", "llama-bf16"} {
		cfg, err := weights.LoadConfig("../../../shared/testdata/tiny/" + name)
		if err != nil {
			t.Fatal(err)
		}
		for _, dt := range []backend.KVDtype{backend.KVAuto, backend.KVBF16, backend.KVFP8} {
			e := New(cfg, be, 0, 64).WithKVDtype(dt)
			for _, c := range []struct{ tokens, seqs int }{{16, 1}, {4096, 2}, {65536, 8}} {
				want := allocated(t, be, e, c.tokens, c.seqs)
				// The store's own fields and the allocator's rounding of
				// each slice (to a size class or page) are the slack.
				if got := e.KVBytes(c.tokens, c.seqs); got > want || want-got > want/200+16<<10 {
					t.Errorf("%s, %s, %d tokens over %d slots: estimate %d bytes, allocated %d", name, dt, c.tokens, c.seqs, got, want)
				}
			}
		}
	}
}

// The real profiles' figures on the CPU (float32): per token, the K/V of
// the full-attention layers only (of KV-owning layers, for Gemma 4 E4B);
// per sequence, the Gated DeltaNet state of every linear layer: the conv's
// last 3 inputs over q|k|v and a 128x128 matrix per value head.
func TestProfileKVFigures(t *testing.T) {
	for _, c := range []struct {
		name          string
		perTok, state int64
	}{
		// 10 of 40 layers full, 2 KV heads of 256; 30 linear layers with
		// 16 key and 32 value heads: 3*(2*16*128+32*128) + 32*128*128 floats.
		{"qwen3.5-35b-a3b-4bit", 10 * 2 * 2 * 256 * 4, 30 * 4 * (3*(2*16*128+32*128) + 32*128*128)},
		// 16 of 64 full, 4 KV heads of 256; 48 linear with 48 value heads.
		{"qwen3.5-27b-4bit", 16 * 2 * 4 * 256 * 4, 48 * 4 * (3*(2*16*128+48*128) + 48*128*128)},
		{"llama-3.1-8b-4bit", 32 * 2 * 8 * 128 * 4, 0},
	} {
		b, err := profiles.Config(c.name)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := weights.ParseConfig(b)
		if err != nil {
			t.Fatal(err)
		}
		e := New(cfg, cpu.New(1), 0, 512)
		// The CPU backend keeps a snapshot place per slot for prefix
		// caching: the state counts twice.
		c.state *= 2
		if e.KVPerToken != c.perTok || e.KVPerSeq != c.state {
			t.Errorf("%s: %d bytes/token, %d bytes/sequence; want %d and %d", c.name, e.KVPerToken, e.KVPerSeq, c.perTok, c.state)
		}
		if got, want := e.KVBytes(4096, 2), 4096*c.perTok+2*c.state; got != want {
			t.Errorf("%s: 4096 tokens over 2 slots: %d bytes, want %d", c.name, got, want)
		}
	}
}
