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
		if !strings.Contains(src, n+"(") && !strings.HasPrefix(n, "qgemv") && !strings.HasPrefix(n, "dgemv_") && !strings.HasPrefix(n, "qmma4_") && !strings.HasPrefix(n, "flash_attn_") {
			t.Errorf("kernel %s not in the source", n)
		}
	}
	for _, want := range []string{"attention", "attn_combine", "kv_store", "rmsnorm", "rope", "embedq_bf", "qgemvgen_f32",
		"dgemvs_bf16", "moe_route", "moe_accum", "argmax_rows", "gather_rows", "fill_f32", "dequant_f32_bf", "copy_f32x4"} {
		found := false
		for _, n := range names {
			found = found || n == want
		}
		if !found {
			t.Errorf("kernel %s not resolved", want)
		}
	}
}
