package main

import (
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/memplan"
)

// inspect's KV figures are the CPU store's: Qwen3.5's linear layers keep
// no K/V but a per-sequence state; Gemma 4 E's shared layers keep nothing.
func TestInspectKVFigures(t *testing.T) {
	r, err := inspect(testdata + "tiny/qwen3_5_text-bf16")
	if err != nil {
		t.Fatal(err)
	}
	// One full layer of 4: 2 KV heads of 32. Three linear layers: the
	// conv's last 3 inputs over q|k|v (2*2*16 + 4*16 channels) and 4
	// value heads' 16x16 state.
	if want := int64(2 * 2 * 32 * 4); r.KVBytesPerTok != want {
		t.Errorf("qwen3.5: %d KV bytes a token, want %d", r.KVBytesPerTok, want)
	}
	if want := int64(3 * 4 * (3*(2*2*16+4*16) + 4*16*16)); r.StateBytes != want {
		t.Errorf("qwen3.5: %d state bytes a sequence, want %d", r.StateBytes, want)
	}
	g, err := inspect(testdata + "tiny/gemma4_e-bf16")
	if err != nil {
		t.Fatal(err)
	}
	// Six layers of one KV head, the last two reading earlier ones: three
	// sliding of 16 and one full of 32 (its per-layer head dim) own K/V.
	if want := int64((3*16 + 32) * 2 * 4); g.KVBytesPerTok != want || g.StateBytes != 0 {
		t.Errorf("gemma4 E: %d KV bytes a token, %d of state; want %d and none", g.KVBytesPerTok, g.StateBytes, want)
	}
}

// The estimate counts the --kv-cache-dtype's bytes: fp8 K/V are a
// quarter of the CPU's float32, the recurrent state stays float32.
func TestInspectEstimateKVDtype(t *testing.T) {
	dir := testdata + "tiny/qwen3_5_text-bf16"
	f32, err := estimateMemory(dir, "cpu", memplan.Request{CtxSize: 256, Parallel: 2})
	if err != nil {
		t.Fatal(err)
	}
	fp8, err := estimateMemory(dir, "cpu", memplan.Request{CtxSize: 256, Parallel: 2, KVDtype: backend.KVFP8})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fp8.Summary, "--parallel 2, --kv-cache-dtype fp8)") {
		t.Errorf("summary %q does not name the dtype", fp8.Summary)
	}
	if fp8.KVPerToken*4 != f32.KVPerToken || fp8.KVPerSeq != f32.KVPerSeq || fp8.KVDtype != "fp8" {
		t.Errorf("fp8 %d bytes a token, %d a sequence (%s); f32 %d and %d", fp8.KVPerToken, fp8.KVPerSeq, fp8.KVDtype, f32.KVPerToken, f32.KVPerSeq)
	}
	if want := f32.KVBytes - (f32.KVPerToken-fp8.KVPerToken)*int64(f32.KVTokens); fp8.KVBytes != want {
		t.Errorf("fp8 KV %d bytes, want %d", fp8.KVBytes, want)
	}
}
