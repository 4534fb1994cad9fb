package plan

// MoEDecodeMaxTokens bounds the steps MoE's per-token path (three
// launches: router, gate/up, down) takes: from 32 tokens the grouped
// paths always do.
const MoEDecodeMaxTokens = 32

// MoEGEMMFrom is the fewest tokens of a step whose MoE takes the grouped
// expert GEMM (moe_qmma4), for E experts, top-k routing, and whether the
// experts are 4-bit floating point (mxfp4, nvfp4) rather than affine.
// The per-token path reads each (token, slot) pair's expert rows once per
// pair, the grouped GEMM each routed expert once for all its rows but
// sorts first. Measured on the H200 (s19b, decode steps at 1k context,
// per-token / grouped ms): synthetic Qwen3-30B-A3B (affine, 128 experts,
// top 8) 8 tokens 7.86 / 9.77, 16: 12.08 / 13.10, 24: 16.98 / 15.79;
// gpt-oss-20b (mxfp4, 32 experts, top 4) 8: 13.44 / 11.90, 16: 21.61 /
// 15.21, 24: 30.14 / 18.27. So affine experts go grouped from about 1.5
// pairs an expert, mxfp4's (whose per-token kernels are slower) from 8
// tokens, the fewest measured; Tuning.MoEGEMMRows, when set, overrides.
func MoEGEMMFrom(t Tuning, E, topk int, fp bool) int {
	if t.MoEGEMMRows > 0 {
		return t.MoEGEMMRows
	}
	if fp {
		return 8
	}
	return min(max((3*E+2*topk-1)/(2*topk), 8), MoEDecodeMaxTokens)
}
