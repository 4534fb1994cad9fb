package plan

import "testing"

func TestPlanGEMV(t *testing.T) {
	q4 := Weight{N: 14336, K: 4096, Quant: true, Bits: 4, GroupShift: 6}
	q4short := Weight{N: 768, K: 2048, Quant: true, Bits: 4, GroupShift: 6}
	q4f32 := Weight{N: 4096, K: 4096, Quant: true, Bits: 4, GroupShift: 6, ScalesF32: true}
	q3 := Weight{N: 512, K: 768, Quant: true, Bits: 3, GroupShift: 6}
	bf := Weight{N: 4096, K: 4096, ElemBytes: 2, Dense: "bf16"}
	mxfp4 := Weight{N: 2880, K: 2880, Quant: true, Bits: 4, GroupShift: 5, FP: true}
	nvfp4 := Weight{N: 4096, K: 4096, Quant: true, Bits: 4, GroupShift: 4, FP: true}
	mxfp8 := Weight{N: 4096, K: 4096, Quant: true, Bits: 8, GroupShift: 5, FP: true}
	nvfp4p := Weight{N: 4096, K: 4096, Quant: true, Bits: 4, GroupShift: 5, FP: true, FPPair: true}
	ok := GEMVShape{XAligned: true, Aligned: true, MMA: true, Slots: 1, Clusters: true}
	with := func(s GEMVShape, m int) GEMVShape { s.M = m; return s }
	for _, c := range []struct {
		name string
		w    Weight
		s    GEMVShape
		want GEMV
	}{
		{"one row 4-bit", q4, with(ok, 1), GEMV{Kind: GEMVMulti}},
		{"8 rows on the tensor cores", q4, with(ok, 8), GEMV{GEMVTensorCore, "qmma4_bf_1_xc", 448, 1, 1, 256, 0}},
		{"16 rows", q4, with(ok, 16), GEMV{GEMVTensorCore, "qmma4_bf_2_xc", 448, 1, 1, 256, 0}},
		{"8 rows, K split over clusters", Weight{N: 4096, K: 4096, Quant: true, Bits: 4, GroupShift: 6},
			func() GEMVShape { s := with(ok, 8); s.SMs = 132; return s }(), GEMV{GEMVTensorCore, "qmma4_bf_1_xc", 128, 1, 2, 256, 2}},
		{"k/v rows, split 8", Weight{N: 1024, K: 4096, Quant: true, Bits: 4, GroupShift: 6},
			func() GEMVShape { s := with(ok, 8); s.SMs = 132; return s }(), GEMV{GEMVTensorCore, "qmma4_bf_1_xc", 32, 1, 8, 256, 8}},
		{"no clusters on the device: no split", Weight{N: 4096, K: 4096, Quant: true, Bits: 4, GroupShift: 6},
			func() GEMVShape { s := with(ok, 8); s.SMs, s.Clusters = 132, false; return s }(), GEMV{GEMVTensorCore, "qmma4_bf_1_xc", 128, 1, 1, 256, 0}},
		{"enough blocks: no split", q4, func() GEMVShape { s := with(ok, 8); s.SMs = 132; return s }(), GEMV{GEMVTensorCore, "qmma4_bf_1_xc", 448, 1, 1, 256, 0}},
		{"32 rows, K split too", Weight{N: 4096, K: 4096, Quant: true, Bits: 4, GroupShift: 6},
			func() GEMVShape { s := with(ok, 32); s.SMs = 132; return s }(), GEMV{GEMVTensorCore, "qmma4_bf_4", 128, 1, 2, 256, 2}},
		{"32 rows: the plain kernel", q4, with(ok, 32), GEMV{GEMVTensorCore, "qmma4_bf_4", 448, 1, 1, 256, 0}},
		{"f32 scales: no _xc", q4f32, with(ok, 2), GEMV{GEMVTensorCore, "qmma4_f32_1", 128, 1, 1, 256, 0}},
		{"router off the tensor cores", q4, GEMVShape{M: 8, XAligned: true, Aligned: true, Slots: 1}, GEMV{GEMVRows, "qgemv4_bf_8", 896, 1, 1, 128, 0}},
		{"3 rows by rows", q4, GEMVShape{M: 3, XAligned: true, Aligned: true, Slots: 1}, GEMV{GEMVRows, "qgemv4_bf_4", 896, 1, 1, 128, 0}},
		{"experts, all slots", q4short, GEMVShape{M: 4, Experts: true, Slots: 8, XAligned: true, Aligned: true, MMA: true},
			GEMV{GEMVRows, "qgemv4_bf_1_g64", 48, 4, 8, 128, 0}},
		{"3-bit: generic", q3, with(ok, 5), GEMV{GEMVGeneric, "qgemvgen_bf", 128, 1, 1, 128, 0}},
		{"unaligned x", q4, GEMVShape{M: 1, Slots: 1, MMA: true}, GEMV{GEMVGeneric, "qgemvgen_bf", 3584, 1, 1, 128, 0}},
		{"dense bf16", bf, with(ok, 2), GEMV{GEMVRows, "dgemv_bf16_2", 1024, 1, 1, 256, 0}},
		{"dense unaligned", bf, GEMVShape{M: 9, Slots: 1}, GEMV{GEMVGeneric, "dgemvs_bf16", 1024, 2, 1, 128, 0}},
		// The floating-point modes: no tensor-core kernels; nvfp4's groups
		// of 16 are half a chunk, so even one row takes the rows kernel.
		{"mxfp4 one row", mxfp4, with(ok, 1), GEMV{Kind: GEMVMulti}},
		{"mxfp4 8 rows", mxfp4, with(ok, 8), GEMV{GEMVRows, "qgemv4_fp_8", 180, 1, 1, 128, 0}},
		{"mxfp8 3 rows", mxfp8, with(ok, 3), GEMV{GEMVRows, "qgemv8_fp_4", 256, 1, 1, 128, 0}},
		{"mxfp4 experts", mxfp4, GEMVShape{M: 2, Experts: true, Slots: 4, XAligned: true, Aligned: true, MMA: true},
			GEMV{GEMVRows, "qgemv4_fp_1_g64", 180, 2, 4, 128, 0}},
		{"nvfp4 pairs one row", nvfp4p, with(ok, 1), GEMV{Kind: GEMVMulti}},
		{"nvfp4 pairs experts", nvfp4p, GEMVShape{M: 3, Experts: true, Slots: 2, XAligned: true, Aligned: true, MMA: true},
			GEMV{GEMVRows, "qgemv4_fp2_1", 512, 3, 2, 128, 0}},
		{"nvfp4 pairs 5 rows", nvfp4p, with(ok, 5), GEMV{GEMVRows, "qgemv4_fp2_8", 256, 1, 1, 128, 0}},
		// (An unpaired layout on the 16-byte kernels: one row on the rows kernel.)
		{"nvfp4 one row", nvfp4, with(ok, 1), GEMV{GEMVRows, "qgemv4_fp_2", 256, 1, 1, 128, 0}},
		{"nvfp4 experts", nvfp4, GEMVShape{M: 3, Experts: true, Slots: 2, XAligned: true, Aligned: true, MMA: true},
			GEMV{GEMVRows, "qgemv4_fp_2", 256, 3, 2, 128, 0}},
		{"nvfp4 unaligned", nvfp4, GEMVShape{M: 1, Slots: 1}, GEMV{GEMVGeneric, "qgemvgen_fp", 1024, 1, 1, 128, 0}},
	} {
		if got := PlanGEMV(c.w, c.s); got != c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
}

func TestRowGroupLanes(t *testing.T) {
	for _, c := range []struct{ K, bits, lanes int }{{4096, 4, 128}, {3072, 4, 128}, {2048, 4, 64}, {768, 4, 32}, {2048, 8, 128}, {1024, 8, 64}} {
		if got := RowGroupLanes(c.K, c.bits); got != c.lanes {
			t.Errorf("RowGroupLanes(%d, %d) = %d, want %d", c.K, c.bits, got, c.lanes)
		}
	}
}
