//go:build linux

package cuda

import (
	"strings"
	"testing"
)

// TestKernelNames checks, without a GPU, that every kernel the ops launch
// is among those resolved at start and defined in the source.
func TestKernelNames(t *testing.T) {
	src := kernelSource()
	names := kernelNames()
	if len(names) < 40 {
		t.Fatalf("only %d kernels found", len(names))
	}
	for _, n := range names {
		// (kv_store, attention and the _f8 twins are macro-made: TestKernelNamesMatchSource checks them on the preprocessed source.)
		if !strings.Contains(src, n+"(") && !strings.HasSuffix(n, "_f8") && n != "kv_store" && n != "attention" && !strings.HasPrefix(n, "qgemv") && !strings.HasPrefix(n, "dgemv_") && !strings.HasPrefix(n, "qmma4_") && !strings.HasPrefix(n, "qmm4_") && !strings.HasPrefix(n, "flash_attn_") && !strings.HasPrefix(n, "flash2_attn_") && !strings.HasPrefix(n, "attn_decode_") && !strings.HasPrefix(n, "attn_dtile_") {
			t.Errorf("kernel %s not in the source", n)
		}
	}
	for _, want := range []string{"attention", "attn_decode_128", "kv_store", "rmsnorm", "rope", "embedq_bf", "qgemvgen_f32",
		"dgemvs_bf16", "moe_route", "moe_accum", "argmax_rows", "gather_rows", "fill_f32", "dequant_f32_bf", "copy_f32x4", "copy_f32",
		"moe_gateup4_bf_g64_o6", "moe_router8_bf_g64", "qgemvm4_fp_g64", "qgemv4_fp2_1", "qgemv8_fp_8", "embedq_fp2",
		"dequant_bf16_fp", "moe_down_acc4_fp2"} {
		found := false
		for _, n := range names {
			found = found || n == want
		}
		if !found {
			t.Errorf("kernel %s not resolved", want)
		}
	}
}

// TestKernelsWaitForPredecessors checks, without a GPU, that every kernel
// definition waits for its predecessor (grid_dep_*), directly or through
// one of the implementations that do it after their weight prefetch: the
// backend launches every kernel with programmatic dependent launch, so a
// kernel that forgets would read its input before it is written.
func TestKernelsWaitForPredecessors(t *testing.T) {
	src := kernelSource()
	parts := strings.Split(src, `extern "C" __global__`)
	waits := []string{"grid_dep_start()", "grid_dep_wait()", "qgemv_impl<", "qgemv_multi_impl<", "attn_decode_impl<", "attn_dtile_impl<", "norm_row<", "moe_gateup_impl<", "moe_down_sum_impl<", "moe_down_acc_impl<", "qmm4_impl<", "qmmw_impl<"}
	for _, p := range parts[1:] {
		open := strings.Index(p, "{")
		if open < 0 {
			t.Fatalf("kernel without a body: %.80s", p)
		}
		head := strings.TrimSpace(p[:open])
		// The body's first lines: the wait belongs at the top.
		body := p[open:min(len(p), open+600)]
		ok := false
		for _, w := range waits {
			ok = ok || strings.Contains(body, w)
		}
		if !ok {
			t.Errorf("kernel %.100s does not call grid_dep_start/grid_dep_wait near its top", head)
		}
	}
	if len(parts) < 30 {
		t.Fatalf("only %d kernel definitions found", len(parts)-1)
	}
}
