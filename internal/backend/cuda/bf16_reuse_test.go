//go:build linux

package cuda

import "testing"

// TestBF16Reuse checks, without a GPU, which prefill products reuse the
// bf16 copy of their input in scratchX: recorded launch sequences as
// gemmBF leaves them (dequantization, conversion unless ready, GEMM), for
// x converted by the first product or written with its copy by the norm
// before it, and the cases that must convert again.
func TestBF16Reuse(t *testing.T) {
	b := hostOnlyBackend()
	const sx, x, other, wscr = 0xa000, 0xb000, 0xc000, 0xd000
	b.scratchX.ptr = sx
	n := 64 * 4096
	rec := func(name string, gx int, args ...uint64) {
		l := launch{fn: fnGemm, gx: uint32(gx)}
		if name != "gemm" {
			l.fn = b.fn(name)
		}
		for _, a := range args {
			l.args[l.n] = a
			l.n++
		}
		b.rec.ls = append(b.rec.ls, l)
	}
	gemm := func(y uint64) { rec("gemm", 1, y, sx, wscr, 64, 1024, 4096, 1) }
	deq := func() { rec("dequant_bf16_bf", 1, wscr, 1, 2, 1024, 4096, 4, 6) }
	conv := func(src uint64) { rec("f32_to_bf16", 1, sx, src, uint64(n)) }
	norm := func(dbf uint64) { rec("rmsnorm", 64, x, other, 0, 4096, 0, dbf) }
	for _, c := range []struct {
		name  string
		build func()
		want  bool
	}{
		{"nothing recorded", func() {}, false},
		{"k after q's conversion", func() { deq(); conv(x); gemm(0x1) }, true},
		{"v after q and k", func() { deq(); conv(x); gemm(0x1); deq(); gemm(0x2) }, true},
		{"with a bias add", func() { deq(); conv(x); gemm(0x1); rec("add_bias", 1, 0x1, 0x9, 64, 1024) }, true},
		{"k after the norm wrote the copy", func() { norm(sx); deq(); gemm(0x1) }, true},
		{"v after the norm wrote the copy", func() { norm(sx); deq(); gemm(0x1); deq(); gemm(0x2) }, true},
		{"norm without the copy", func() { norm(0); deq(); gemm(0x1) }, false},
		{"another tensor converted", func() { deq(); conv(other); gemm(0x1) }, false},
		{"a product wrote x", func() { deq(); conv(x); gemm(x) }, false},
		{"x rewritten since", func() { deq(); conv(x); gemm(0x1); rec("scale_f32", 1, x, 0, uint64(n)) }, false},
		{"a TF32 product between", func() { deq(); conv(x); gemm(0x1); rec("gemm", 1, 0x3, other, wscr, 64, 1024, 4096, 0) }, false},
	} {
		b.rec.ls = b.rec.ls[:0]
		c.build()
		if got := b.bf16Ready(x, n); got != c.want {
			t.Errorf("%s: bf16Ready %v, want %v", c.name, got, c.want)
		}
	}
}
