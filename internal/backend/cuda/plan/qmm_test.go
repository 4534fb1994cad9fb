package plan

import "testing"

func TestPlanQMM(t *testing.T) {
	q := func(n, k, gs int) Weight { return Weight{N: n, K: k, Quant: true, Bits: 4, GroupShift: gs} }
	def := DefaultTuning()
	wg := def
	wg.QMMWarpgroup = true
	for _, c := range []struct {
		name string
		w    Weight
		m    int
		t    Tuning
		want QMM
		ok   bool
	}{
		{"64 rows of 4096x4096: the narrow form, 32 blocks split 8 ways", q(4096, 4096, 6), 64, def, QMM{"qmm4_bf_64_m2d1", 1, 32, 8, 64, 128, 3, 0}, true},
		{"64 rows of gate (14336): the wide form, 112 blocks split 2", q(14336, 4096, 6), 64, def, QMM{"qmm4_bf_64", 1, 112, 2, 64, 256, 2, 0}, true},
		{"down (K 14336)", q(4096, 14336, 6), 64, def, QMM{"qmm4_bf_64_m2d1", 1, 32, 8, 64, 128, 3, 0}, true},
		{"128 rows: 2 row tiles", q(4096, 4096, 6), 128, def, QMM{"qmm4_bf_64_m2d1", 2, 32, 6, 64, 128, 3, 0}, true},
		{"256 rows: cuBLAS", q(4096, 4096, 6), 256, def, QMM{}, false},
		{"odd rows round up to a tile", q(1024, 4096, 5), 97, def, QMM{"qmm4_bf_64_m2d1", 2, 8, 8, 64, 128, 3, 0}, true},
		{"short K caps the split", q(67, 256, 6), 40, def, QMM{"qmm4_bf_64_m2d1", 1, 1, 1, 64, 128, 3, 0}, true},
		{"group 128", q(130, 384, 7), 33, def, QMM{"qmm4_bf_64_m2d1", 1, 2, 1, 64, 128, 3, 0}, true},
		{"32 rows: qmma4", q(4096, 4096, 6), 32, def, QMM{}, false},
		{"16 rows: qmma4", q(4096, 4096, 6), 16, def, QMM{}, false},
		{"17 rows when asked: a 64-row tile", q(4096, 4096, 6), 17, Tuning{QMMMinRows: 9, QMMMaxRows: 128, Clusters: true}, QMM{"qmm4_bf_64_m2d1", 1, 32, 8, 64, 128, 3, 0}, true},
		{"the wide form when asked", q(4096, 4096, 6), 64, Tuning{QMMMinRows: 33, QMMMaxRows: 128, QMMVariant: "wide", Clusters: true},
			QMM{"qmm4_bf_64", 1, 32, 8, 64, 256, 2, 0}, true},
		{"three blocks an SM split more", q(14336, 4096, 6), 64, Tuning{QMMMinRows: 33, QMMMaxRows: 128, QMMVariant: "m2d1", Clusters: true},
			QMM{"qmm4_bf_64_m2d1", 1, 112, 4, 64, 128, 3, 0}, true},
		{"unknown form", q(4096, 4096, 6), 64, Tuning{QMMMinRows: 33, QMMMaxRows: 128, QMMVariant: "x", Clusters: true}, QMM{}, false},
		{"warpgroup: 64 rows stay on qmm4", q(4096, 4096, 6), 64, wg, QMM{"qmm4_bf_64_m2d1", 1, 32, 8, 64, 128, 3, 0}, true},
		{"the 128-row tile for 64 rows when asked", q(4096, 4096, 6), 64, Tuning{QMMMinRows: 33, QMMMaxRows: 128, QMMWarpgroup: true, QMMVariant: "w128", Clusters: true},
			QMM{"qmm4_w128", 1, 32, 8, 128, 256, 2, QMMWSmem()}, true},
		{"warpgroup: 65 rows on one 128-row tile", q(4096, 14336, 6), 65, wg, QMM{"qmm4_w128", 1, 32, 8, 128, 256, 2, QMMWSmem()}, true},
		{"warpgroup: 128 rows, group 32", q(1024, 4096, 5), 128, wg, QMM{"qmm4_w128", 1, 8, 8, 128, 256, 2, QMMWSmem()}, true},
		{"warpgroup: 256 rows still cuBLAS", q(4096, 4096, 6), 256, wg, QMM{}, false},
		{"warpgroup off by the variant", q(4096, 4096, 6), 64, Tuning{QMMMinRows: 33, QMMMaxRows: 128, QMMWarpgroup: true, QMMVariant: "m2d1", Clusters: true},
			QMM{"qmm4_bf_64_m2d1", 1, 32, 8, 64, 128, 3, 0}, true},
		{"no clusters on the device: no split", q(4096, 4096, 6), 64, Tuning{QMMMinRows: 33, QMMMaxRows: 128},
			QMM{"qmm4_bf_64_m2d1", 1, 32, 1, 64, 128, 3, 0}, true},
		{"prefill: cuBLAS", q(4096, 4096, 6), 2048, def, QMM{}, false},
		{"off", q(4096, 4096, 6), 64, Tuning{}, QMM{}, false},
		{"8-bit: not ours", Weight{N: 4096, K: 4096, Quant: true, Bits: 8, GroupShift: 6}, 64, def, QMM{}, false},
		{"f32 scales: not ours", Weight{N: 4096, K: 4096, Quant: true, Bits: 4, GroupShift: 6, ScalesF32: true}, 64, def, QMM{}, false},
		{"mxfp4: not ours", Weight{N: 4096, K: 4096, Quant: true, Bits: 4, GroupShift: 5, FP: true}, 64, def, QMM{}, false},
		{"K not a multiple of 64", q(4096, 4000, 5), 64, def, QMM{}, false},
		{"dense", Weight{N: 4096, K: 4096, ElemBytes: 2, Dense: "bf16"}, 64, def, QMM{}, false},
	} {
		got, ok := PlanQMM(c.w, c.m, 132, c.t)
		if got != c.want || ok != c.ok {
			t.Errorf("%s:\n got %+v %v\nwant %+v %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

func TestQMMWSmem(t *testing.T) {
	// 4 slabs of 16384 + 4096 + 2048 bytes hold the partial tile (128 x 132
	// floats); 1024 bytes to align the ring and 64 for the mbarriers.
	if got := QMMWSmem(); got != 90112+1088 {
		t.Errorf("QMMWSmem() = %d", got)
	}
}

// The warpgroup forms fit Hopper's shared memory: 227 KB a block at most,
// and the blocks an SM each form asks for within the SM's 228 KB (each
// block also reserves 1 KB).
func TestQMMWKernelsFit(t *testing.T) {
	const perBlock, perSM = 227 << 10, 228 << 10
	ks := QMMWKernels()
	if ks[0].Variant != "w128" || ks[0].Name != "qmm4_w128" {
		t.Fatalf("the planner's form first: %+v", ks[0])
	}
	for _, k := range ks {
		q := qmmKernels[k.Variant]
		if k.Smem > perBlock || q.perSM*(k.Smem+1024) > perSM {
			t.Errorf("%s: %d bytes a block, %d blocks an SM: over the SM's shared memory", k.Name, k.Smem, q.perSM)
		}
	}
}
