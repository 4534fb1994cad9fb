//go:build linux

package cuda

import (
	"fmt"
	"math"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/tensor"
)

// Ops record launches; nothing runs until a result is needed (ReadRows,
// Argmax, Sync) or the next BeginStep. Errors are sticky and reported by
// the next Sync or BeginStep: the interface's ops return none.

func (b *Backend) needStep(op string) {
	if !b.inStep {
		panic("cuda: " + op + " needs a batch: call BeginStep first")
	}
}

func dense(d tensor.DType) string {
	switch d {
	case tensor.BF16:
		return "bf16"
	case tensor.F16:
		return "f16"
	}
	return "f32"
}

func (w *weight) sbName() string {
	if w.sbF32 {
		return "f32"
	}
	return "bf"
}

func (b *Backend) Embed(dst backend.Tensor, table backend.Weight) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.needStep("Embed")
	d, w := b.tt(dst), b.wt(table)
	T := b.step.tokens
	if d.rows != T || d.cols != w.in {
		panic(fmt.Sprintf("cuda: Embed into %dx%d from a table of width %d for %d tokens", d.rows, d.cols, w.in, T))
	}
	if T == 0 {
		return
	}
	threads := min(256, roundUp(w.in, 32))
	if w.quant {
		b.newLaunch("embedq_"+w.sbName(), T, 1, 1, threads).p(d.ptr).p(w.w).p(w.sb).p(b.step.tok).i(w.in).i(w.bits).i(w.gshft)
		return
	}
	b.newLaunch("embed_"+dense(w.dtype), T, 1, 1, threads).p(d.ptr).p(w.w).p(b.step.tok).i(w.in)
}

func roundUp(n, m int) int { return (n + m - 1) / m * m }

// gemmRows is the row count above which Linear uses cuBLAS (TF32 on f32
// activations) instead of the GEMV kernels, which re-read the weights once
// per 8 rows.
const gemmRows = 32

func (b *Backend) Linear(dst, x backend.Tensor, wt, bias backend.Weight) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d, s, w := b.tt(dst), b.tt(x), b.wt(wt)
	if s.cols != w.in || d.cols != w.out || d.rows != s.rows || w.experts != 1 {
		panic(fmt.Sprintf("cuda: Linear %dx%d @ %v^T into %dx%d", s.rows, s.cols, w.shape, d.rows, d.cols))
	}
	var bp uintptr
	if bias != nil {
		bp = b.wt(bias).w
	}
	if s.rows == 0 {
		return
	}
	if s.rows > gemmRows {
		b.gemm(d, s, w, bp)
		return
	}
	b.gemv(d.ptr, s.ptr, w, bp, s.rows, d.cols, s.cols, 0, 0, 0)
}

// gemv records y[M,N] = x[M,K] @ W^T for M <= 8 per row chunk (grid.y
// covers more). With eidx != 0, row t uses expert eidx[t*topk+slot]; a
// negative slot runs all topk slots in one launch (grid.z, see rebase in
// gemv.cu).
func (b *Backend) gemv(y, x uintptr, w *weight, bias uintptr, M, ldy, ldx int, eidx uintptr, topk, slot int) {
	gz := 1
	if eidx != 0 && slot < 0 {
		gz = topk
	}
	N, K := w.out, w.in
	mr := 8
	switch {
	case eidx != 0 || M == 1:
		mr = 1
	case M == 2:
		mr = 2
	case M <= 4:
		mr = 4
	}
	gy := (M + mr - 1) / mr
	if eidx != 0 {
		gy = M
	}
	if M == 1 && eidx == 0 && w.quant && (w.bits == 4 || w.bits == 8) && x%16 == 0 && (K*w.bits/32)%4 == 0 {
		b.gemvMulti(y, x, w, bias)
		return
	}
	if b.useMMA && M >= 2 && M <= 32 && eidx == 0 && w.quant && w.bits == 4 && w.gshft >= 6 && K%64 == 0 &&
		x%16 == 0 && ldx%4 == 0 {
		// Tensor cores: up to 8 activation rows per mma column tile.
		nt := 1
		switch {
		case M > 16:
			nt = 4
		case M > 8:
			nt = 2
		}
		name := fmt.Sprintf("qmma4_%s_%d", w.sbName(), nt)
		rows := 32 // weight rows per block
		if b.mmaVariant != "" && !w.sbF32 && nt <= 2 {
			name += "_" + b.mmaVariant
			if b.mmaVariant == "r4" {
				rows = 64
			}
		}
		b.newLaunch(name, (N+rows-1)/rows, 1, 1, 256).p(y).p(x).p(w.w).p(w.sb).p(bias).
			i(N).i(K).i(M).i(w.gshft).i(ldy).i(ldx).p(0).i(0).i(0).i64(0).i64(0)
		return
	}
	aligned := x%16 == 0 && ldx%4 == 0
	var name string
	var wstride, sbstride int
	fast := false
	if w.quant {
		nw, ng := w.wordsPerRow(), K/w.group
		wstride = N * nw
		sbstride = N * ng
		if w.sbF32 {
			sbstride *= 2
		}
		fast = (w.bits == 4 || w.bits == 8) && aligned && (K*w.bits/32)%4 == 0
		if fast {
			name = fmt.Sprintf("qgemv%d_%s_%d", w.bits, w.sbName(), mr)
			if mr == 1 {
				name += rowGroupSuffix(K, w.bits)
			}
		} else {
			name = "qgemvgen_" + w.sbName()
		}
	} else {
		es := w.dtype.Size()
		wstride = N * K * es / 4
		ve := 16 / es
		fast = aligned && K%ve == 0
		if fast {
			name = fmt.Sprintf("dgemv_%s_%d", dense(w.dtype), mr)
		} else {
			name = "dgemvs_" + dense(w.dtype)
		}
	}
	// Fast dense kernels: a block of 8 warps takes 4 rows, the warps
	// splitting K. Fast quantized kernels: 4 warps take qgemvRows(mr) rows.
	// Generic kernels: one warp per row, 4 per block, 8 activation rows.
	gx, threads := (N+3)/4, 256
	if fast && w.quant {
		nr := 16 // qgemv_rows: 4 warps of 4 rows
		if mr == 1 {
			nr = 8 * 128 / rowGroupLanes(K, w.bits) // v3: row groups of lanes split K over 8 rows
		}
		gx, threads = (N+nr-1)/nr, 128
	}
	if !fast {
		threads = 128
		if eidx == 0 {
			gy = (M + 7) / 8
		}
	}
	l := b.newLaunch(name, gx, gy, gz, threads).p(y).p(x).p(w.w).p(w.sb).p(bias).i(N).i(K).i(M).i(w.gshft).
		i(ldy).i(ldx).p(eidx).i(topk).i(slot).i64(wstride).i64(sbstride)
	if w.quant && !fast {
		l.i(w.bits)
	}
}

// Argument slots of the qgemvm (multi-matrix) kernel.
const (
	mX, mK, mGshift      = 0, 1, 2
	mSeg0, mSegLen       = 3, 5 // y, w, sb, bias, N per matrix
	mNB0, mNB1, mGLU, mD = 18, 19, 20, 21
	mNSrc, mNW, mEps     = 22, 23, 24 // folded RMSNorm: source row, weight, eps
	mResA, mResDst       = 25, 26     // folded residual Add: resDst = resA + y0
	multiRows            = 8          // MULTI_NR
	actSiLU, actGELU     = 1, 2
)

// multiKernels are the qgemvm kernels: the defaults, their row-group forms
// for short rows (_g64, _g32) and the NR/prefetch variants
// (qgemvm4_bf_v<NR><PF>) the benchmark compares.
var multiKernels = []string{"qgemvm4_bf", "qgemvm4_f32", "qgemvm8_bf", "qgemvm8_f32",
	"qgemvm4_bf_g64", "qgemvm4_f32_g64", "qgemvm8_bf_g64", "qgemvm8_f32_g64",
	"qgemvm4_bf_g32", "qgemvm4_f32_g32", "qgemvm8_bf_g32", "qgemvm8_f32_g32",
	"qgemvm4_bf_v80", "qgemvm4_bf_v40", "qgemvm4_bf_v41", "qgemvm4_bf_v81", "qgemvm4_bf_v85", "qgemvm4_bf_v86", "qgemvm4_bf_v8n"}

// rowGroupLanes mirrors the kernels' row groups (gemv.cu): rows of fewer
// than 96 16-byte chunks are split over 64 or 32 lanes instead of the
// block's 128, so a block takes 2 or 4 groups of 8 rows.
func rowGroupLanes(K, bits int) int {
	switch nc := K * bits / 128; {
	case nc >= 96:
		return 128
	case nc > 32:
		return 64
	}
	return 32
}

// rowGroupSuffix names the kernel form for rowGroupLanes.
func rowGroupSuffix(K, bits int) string {
	if l := rowGroupLanes(K, bits); l < 128 {
		return fmt.Sprintf("_g%d", l)
	}
	return ""
}

// gemvMulti records a one-row quantized product. When the previous launch
// is a product of the same x with the same kind of weight (a layer's q, k
// and v, or gate and up), the matrix joins that launch instead: one launch
// streams all of them, so the small k and v matrices no longer each pay a
// launch and a tail.
func (b *Backend) gemvMulti(y, x uintptr, w *weight, bias uintptr) {
	name := fmt.Sprintf("qgemvm%d_%s", w.bits, w.sbName())
	nr := 8 // the default kernels' NR
	if w.bits == 4 && !w.sbF32 && b.multiVariant != "" {
		name += "_v" + b.multiVariant // benchmark variants: NR then prefetch
		nr = int(b.multiVariant[0] - '0')
	} else {
		name += rowGroupSuffix(w.in, w.bits)
		nr *= 128 / rowGroupLanes(w.in, w.bits) // rows per block
	}
	fn, fnFold := b.fn(name), b.fns[name+"_f"]
	nb := (w.out + nr - 1) / nr
	if n := len(b.rec.ls); b.fuse && n > 0 {
		l := &b.rec.ls[n-1]
		if (l.fn == fn || (l.fn == fnFold && fnFold != 0)) && uintptr(l.args[mX]) == x && int(int32(l.args[mK])) == w.in && int(int32(l.args[mGshift])) == w.gshft &&
			l.args[mGLU] == 0 && l.args[mSeg0+2*mSegLen] == 0 && l.args[mResDst] == 0 && y != x && y != uintptr(l.args[mNSrc]) {
			seg := 1
			if l.args[mSeg0+mSegLen] != 0 {
				seg = 2
			}
			for i := 0; i < seg; i++ {
				if uintptr(l.args[mSeg0+i*mSegLen]) == y {
					seg = -1 // same output twice: keep the order, do not merge
					break
				}
			}
			if seg > 0 {
				o := mSeg0 + seg*mSegLen
				l.args[o], l.args[o+1], l.args[o+2], l.args[o+3] = uint64(y), uint64(w.w), uint64(w.sb), uint64(bias)
				l.args[o+4] = uint64(uint32(int32(w.out)))
				if seg == 1 {
					l.args[mNB1] = uint64(nb)
				}
				l.gx += uint32(nb)
				return
			}
		}
	}
	var nsrc, nw uintptr
	var eps float32
	if fnFold != 0 {
		nsrc, nw, eps = b.takeNorm(x, w.in, w.bytes)
		if nsrc != 0 {
			name += "_f"
		}
	}
	l := b.newLaunch(name, nb, 1, 1, 128).p(x).i(w.in).i(w.gshft).p(y).p(w.w).p(w.sb).p(bias).i(w.out)
	for l.n < mNB0 {
		l.p(0)
	}
	l.i(nb).i(0).i(0).p(0).p(nsrc).p(nw).f(eps).p(0).p(0)
}

// foldNormMaxBytes is the largest first matrix a one-row norm is folded
// into. The folded norm reads its weights once per block beside x
// (qgemv_multi_impl), which measured on the H200 costs a GEMV more than a
// launch when the matrix is large (Llama-3.1-8B: 477 us more per decode
// step with its q/k/v and gate/up folded); small products (a MoE router,
// a 2048-wide model's projections) gain the launch.
const foldNormMaxBytes = 6 << 20

// takeNorm folds the one-row norm just recorded, which wrote x (K
// columns), into the qgemvm launch about to read it (the _f kernels, see
// qgemv_multi_impl) when that product's first matrix has at most
// foldNormMaxBytes: it drops the norm launch and returns the norm's
// source, weight and eps, or zeros. Two forms fold: a plain rmsnorm (not
// in place: block 0 writes x while the others read the source), and an
// add_rmsnorm whose add read the output of the one-matrix qgemvm launch
// just before it (a decode step's o or down projection), whose epilogue
// then does the add (foldAdd).
func (b *Backend) takeNorm(x uintptr, K, bytes int) (src, w uintptr, eps float32) {
	n := len(b.rec.ls)
	if !b.fuse || !b.fuseNorm || n == 0 || K%4 != 0 || bytes > foldNormMaxBytes {
		return 0, 0, 0
	}
	l := &b.rec.ls[n-1]
	if l.gx != 1 {
		return 0, 0, 0
	}
	switch l.fn {
	case b.fn("rmsnorm"): // dst, x, w, cols, eps, dbf
		if uintptr(l.args[0]) != x || uintptr(l.args[1]) == x || int(int32(l.args[3])) != K {
			return 0, 0, 0
		}
		b.rec.ls = b.rec.ls[:n-1]
		return uintptr(l.args[1]), uintptr(l.args[2]), math.Float32frombits(uint32(l.args[4]))
	case b.fn("add_rmsnorm"): // sum, a, b, dst, w, cols, eps, dbf
		sum := uintptr(l.args[0])
		if n < 2 || uintptr(l.args[3]) != x || sum == x || int(int32(l.args[5])) != K ||
			!b.foldAdd(&b.rec.ls[n-2], sum, uintptr(l.args[1]), uintptr(l.args[2]), K) {
			return 0, 0, 0
		}
		b.rec.ls = b.rec.ls[:n-1]
		return sum, uintptr(l.args[4]), math.Float32frombits(uint32(l.args[6]))
	}
	return 0, 0, 0
}

// foldAdd makes the one-matrix qgemvm launch l, which wrote a or c (N =
// cols), also write sum = a + c in its epilogue (resDst = resA + y0),
// switching it to its _f kernel; or the one-token moe_down_sum launch l,
// which wrote c (or a), add it into sum when sum is the other operand
// (its res argument). It reports whether it did.
func (b *Backend) foldAdd(l *launch, sum, a, c uintptr, cols int) bool {
	if b.isMoEDownSum(l.fn) { // arguments: dst, res, ...
		dst := uintptr(l.args[0])
		if l.gy != 1 || l.args[1] != 0 || !((dst == c && sum == a) || (dst == a && sum == c)) {
			return false
		}
		l.args[1] = uint64(sum)
		return true
	}
	fold := b.foldVariant(l.fn)
	if fold == 0 || l.args[mGLU] != 0 || l.args[mSeg0+mSegLen] != 0 || l.args[mResDst] != 0 ||
		int(int32(l.args[mSeg0+4])) != cols {
		return false
	}
	y, other := uintptr(l.args[mSeg0]), uintptr(0)
	switch y {
	case c:
		other = a
	case a:
		other = c
	default:
		return false
	}
	// Other blocks read x (or a folded norm's source) while a block
	// writes sum: they must not overlap.
	if sum == uintptr(l.args[mX]) || sum == uintptr(l.args[mNSrc]) {
		return false
	}
	l.fn = fold
	l.args[mResA], l.args[mResDst] = uint64(other), uint64(sum)
	return true
}

// isMoEDownSum reports whether fn is one of the moe_down_sum kernels (a
// set built once: this runs as each decode step is recorded).
func (b *Backend) isMoEDownSum(fn uintptr) bool {
	if b.downSumFns == nil {
		b.downSumFns = map[uintptr]bool{}
		for n, f := range b.fns {
			if strings.HasPrefix(n, "moe_down_sum") {
				b.downSumFns[f] = true
			}
		}
	}
	return b.downSumFns[fn]
}

// foldVariant is the _f kernel of a qgemvm kernel (itself for one), or 0.
func (b *Backend) foldVariant(fn uintptr) uintptr {
	for _, c := range multiKernels {
		if f := b.fns[c+"_f"]; f != 0 && (fn == b.fn(c) || fn == f) {
			return f
		}
	}
	return 0
}

// fuseGLU turns a just-recorded two-matrix product of gate and up into the
// kernel that also writes act(gate)*up to dst. It reports whether it did.
func (b *Backend) fuseGLU(d, g, u *Tensor, act backend.Activation) bool {
	n := len(b.rec.ls)
	if !b.fuse || n == 0 || g.rows != 1 {
		return false
	}
	l := &b.rec.ls[n-1]
	name, nr := "", 8 // nr: rows of each matrix per block
	for _, c := range multiKernels {
		if l.fn == b.fn(c) || l.fn == b.fns[c+"_f"] {
			name = c
			switch {
			case strings.Contains(c, "_v"):
				nr = int(c[len(c)-2] - '0')
			case strings.HasSuffix(c, "_g64"):
				nr = 16
			case strings.HasSuffix(c, "_g32"):
				nr = 32
			}
		}
	}
	s0, s1 := mSeg0, mSeg0+mSegLen
	if name == "" || l.args[mGLU] != 0 || l.args[s1+mSegLen] != 0 || uintptr(l.args[s0]) != g.ptr || uintptr(l.args[s1]) != u.ptr ||
		l.args[s0+4] != l.args[s1+4] || int(int32(l.args[s0+4])) != g.cols {
		return false
	}
	code := actSiLU
	if act == backend.GELUTanh {
		code = actGELU
	}
	l.args[mGLU], l.args[mD] = uint64(code), uint64(d.ptr)
	l.gx = uint32((g.cols + nr/2 - 1) / (nr / 2))
	return true
}

// gemm records a many-row product through cuBLAS: the weight is widened
// (or dequantized) to f32 into a scratch buffer, then a TF32 GEMM runs on
// the f32 activations.
func (b *Backend) gemm(d, s *Tensor, w *weight, bias uintptr) {
	if b.gemmBF16 && (w.quant || w.dtype == tensor.BF16) {
		b.gemmBF(d, s, w, bias)
		return
	}
	N, K := w.out, w.in
	wp := w.w
	if w.quant || w.dtype != tensor.F32 {
		unbind := b.bind()
		err := b.grow(&b.scratch, N*K*4)
		unbind()
		if err != nil {
			b.fail(err)
			return
		}
		wp = b.scratch.ptr
		n := N * K
		switch {
		case w.quant:
			b.newLaunch("dequant_f32_"+w.sbName(), b.gridFor(n), 1, 1, 256).p(wp).p(w.w).p(w.sb).i(N).i(K).i(w.bits).i(w.gshft)
		case w.dtype == tensor.BF16:
			b.newLaunch("bf16_to_f32", b.gridFor(n), 1, 1, 256).p(wp).p(w.w).i64(n)
		default:
			b.newLaunch("f16_to_f32", b.gridFor(n), 1, 1, 256).p(wp).p(w.w).i64(n)
		}
	}
	b.rec.ls = append(b.rec.ls, launch{fn: fnGemm})
	l := &b.rec.ls[len(b.rec.ls)-1]
	l.p(d.ptr).p(s.ptr).p(wp).i(s.rows).i(N).i(K).i(0)
	b.rec.gemm = true
	if bias != 0 {
		n := s.rows * N
		b.newLaunch("add_bias", b.gridFor(n), 1, 1, 256).p(d.ptr).p(bias).i(s.rows).i(N)
	}
}

// gemmBF records a many-row product on bf16 operands: the weight is
// dequantized to bf16 (dense bf16 weights are used as stored), x is
// rounded to bf16, and cuBLAS multiplies on the tensor cores with f32
// accumulation into the f32 output. Against the TF32 path this halves the
// scratch traffic and doubles the tensor rate; the price is bf16 rounding
// of both operands (conformance bound 1e-2, as for bf16 activations).
func (b *Backend) gemmBF(d, s *Tensor, w *weight, bias uintptr) {
	N, K, M := w.out, w.in, s.rows
	unbind := b.bind()
	xp := b.scratchX.ptr
	err := b.grow(&b.scratchX, M*K*2)
	ready := err == nil && (b.scratchX.ptr == xp && b.bf16Ready(s.ptr, M*K) || b.bf16FromProducer(s.ptr, M*K))
	if err == nil && w.quant {
		err = b.grow(&b.scratch, N*K*2)
	}
	unbind()
	if err != nil {
		b.fail(err)
		return
	}
	wp := w.w
	if w.quant {
		wp = b.scratch.ptr
		b.newLaunch("dequant_bf16_"+w.sbName(), b.gridFor(N*K/8), 1, 1, 256).p(wp).p(w.w).p(w.sb).i(N).i(K).i(w.bits).i(w.gshft)
	}
	if !ready {
		b.newLaunch("f32_to_bf16", b.gridFor(M*K), 1, 1, 256).p(b.scratchX.ptr).p(s.ptr).i64(M * K)
	}
	b.rec.ls = append(b.rec.ls, launch{fn: fnGemm})
	l := &b.rec.ls[len(b.rec.ls)-1]
	l.p(d.ptr).p(b.scratchX.ptr).p(wp).i(M).i(N).i(K).i(1)
	b.rec.gemm = true
	if bias != 0 {
		b.newLaunch("add_bias", b.gridFor(M*N), 1, 1, 256).p(d.ptr).p(bias).i(M).i(N)
	}
}

// bf16Ready reports whether scratchX already holds x (n elements) in
// bf16: the launches recorded since are a product that read it (the
// conversion, a GEMM on scratchX writing elsewhere, maybe its bias add).
// Called before this product's dequantization is recorded. A layer's q, k and v (and gate
// and up) read the same x, so two of three conversions go.
func (b *Backend) bf16Ready(x uintptr, n int) bool {
	ls := b.rec.ls
	i := len(ls) - 1
	if i >= 0 && ls[i].fn == b.fn("add_bias") && uintptr(ls[i].args[0]) != x {
		i--
	}
	if i < 1 || ls[i].fn != fnGemm || uintptr(ls[i].args[1]) != b.scratchX.ptr || uintptr(ls[i].args[0]) == x {
		return false
	}
	c := &ls[i-1]
	return c.fn == b.fn("f32_to_bf16") && uintptr(c.args[0]) == b.scratchX.ptr && uintptr(c.args[1]) == x && int(c.args[2]) == n
}

// bf16FromProducer makes the launch just recorded, when it is an RMSNorm,
// an add+RMSNorm or a gated activation that writes x (n elements), also
// write x's bf16 copy into scratchX (their dbf argument), and reports
// whether it did: the product then skips its conversion pass, which
// re-read x (a prefill's norm output, or its 14336-wide activation).
func (b *Backend) bf16FromProducer(x uintptr, n int) bool {
	if len(b.rec.ls) == 0 {
		return false
	}
	l := &b.rec.ls[len(b.rec.ls)-1]
	var dst uintptr
	var elems, slot int
	switch l.fn {
	case b.fn("rmsnorm"): // dst, x, w, cols, eps, dbf
		dst, elems, slot = uintptr(l.args[0]), int(l.gx)*int(int32(l.args[3])), 5
	case b.fn("add_rmsnorm"): // sum, a, b, dst, w, cols, eps, dbf
		dst, elems, slot = uintptr(l.args[3]), int(l.gx)*int(int32(l.args[5])), 7
	case b.fn("gated_silu"), b.fn("gated_gelu"): // d, g, u, n, dbf
		dst, elems, slot = uintptr(l.args[0]), int(l.args[3]), 4
	default:
		return false
	}
	if dst != x || elems != n || l.args[slot] != 0 {
		return false
	}
	l.args[slot] = uint64(b.scratchX.ptr)
	return true
}

const cublasComputeTF32 = 77 // CUBLAS_COMPUTE_32F_FAST_TF32

func (b *Backend) runGemm(l *launch) error {
	y, x, w := uintptr(l.args[0]), uintptr(l.args[1]), uintptr(l.args[2])
	m, n, k := int(int32(l.args[3])), int(int32(l.args[4])), int(int32(l.args[5]))
	alpha, beta := float32(1), float32(0)
	in, compute := uintptr(cudaR32F), uintptr(cublasComputeTF32)
	if l.args[6] == 1 {
		in, compute = cudaR16BF, cublasCompute32F
	}
	r, _, _ := purego.SyscallN(b.bl.gemmEx, b.bl.handle, cublasOpT, cublasOpN, uintptr(n), uintptr(m), uintptr(k),
		uintptr(unsafe.Pointer(&alpha)), w, in, uintptr(k), x, in, uintptr(k),
		uintptr(unsafe.Pointer(&beta)), y, cudaR32F, uintptr(n), compute, cublasGemmDflt)
	return blasErr(fmt.Sprintf("gemm %dx%dx%d", m, n, k), r)
}

func (b *Backend) RMSNorm(dst, x backend.Tensor, w backend.Weight, eps float32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d, s := b.tt(dst), b.tt(x)
	if d.rows != s.rows || d.cols != s.cols {
		panic("cuda: RMSNorm shape mismatch")
	}
	var wp uintptr
	if w != nil {
		wp = b.wt(w).w
	}
	if s.rows == 0 {
		return
	}
	threads := min(1024, max(32, roundUp(s.cols/4, 32)))
	// An Add that wrote x just before: do both in one pass over the row.
	if n := len(b.rec.ls); b.fuse && n > 0 {
		l := &b.rec.ls[n-1]
		if l.fn == b.fn("add_f32") && uintptr(l.args[0]) == s.ptr && int(l.args[3]) == s.rows*s.cols {
			a, c := uintptr(l.args[1]), uintptr(l.args[2])
			b.rec.ls = b.rec.ls[:n-1]
			b.newLaunch("add_rmsnorm", s.rows, 1, 1, threads).p(s.ptr).p(a).p(c).p(d.ptr).p(wp).i(s.cols).f(eps).p(0)
			return
		}
	}
	b.newLaunch("rmsnorm", s.rows, 1, 1, threads).p(d.ptr).p(s.ptr).p(wp).i(s.cols).f(eps).p(0)
}

func (b *Backend) ApplyRoPE(x backend.Tensor, heads, headDim int, r backend.RoPE) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.needStep("ApplyRoPE")
	t := b.tt(x)
	half := r.RotaryDim / 2
	if t.rows != b.step.tokens || t.cols < heads*headDim || r.RotaryDim > headDim || len(r.InvFreq) < half {
		panic(fmt.Sprintf("cuda: ApplyRoPE on %dx%d with %d heads of %d, rotary %d", t.rows, t.cols, heads, headDim, r.RotaryDim))
	}
	if t.rows == 0 || half == 0 {
		return
	}
	scale := r.Scale
	if scale == 0 {
		scale = 1
	}
	tab := b.ropeTable(r.InvFreq[:half])
	// q then k with the same table: one launch rotates both.
	if n := len(b.rec.ls); b.fuse && n > 0 {
		l := &b.rec.ls[n-1]
		if l.fn == b.fn("rope") && uintptr(l.args[2]) == tab && int(l.gx) == t.rows && int(int32(l.args[4])) == headDim &&
			int(int32(l.args[5])) == half && uint32(l.args[6]) == math.Float32bits(scale) && uintptr(l.args[0]) != t.ptr {
			x1, h1, ld1 := uintptr(l.args[0]), int(int32(l.args[3])), int(int32(l.args[7]))
			b.rec.ls = b.rec.ls[:n-1]
			b.newLaunch("rope2", t.rows, h1+heads, 1, min(128, roundUp(half, 32))).p(x1).i(h1).i(ld1).p(t.ptr).i(t.cols).
				p(b.step.pos).p(tab).i(headDim).i(half).f(scale)
			return
		}
	}
	b.newLaunch("rope", t.rows, heads, 1, min(128, roundUp(half, 32))).p(t.ptr).p(b.step.pos).p(tab).i(heads).i(headDim).
		i(half).f(scale).i(t.cols)
}

// ropeTable uploads an inverse-frequency table once per distinct content.
func (b *Backend) ropeTable(f []float32) uintptr {
	key := string(unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f)))
	if p, ok := b.ropeTabs[key]; ok {
		return p
	}
	defer b.bind()()
	b.flush() // the copy below is synchronous; keep recorded order
	p, err := b.allocPersistent(4 * len(f))
	if err == nil {
		err = b.htod(p, unsafe.Pointer(&f[0]), 4*len(f))
	}
	if err != nil {
		b.fail(err)
		return 0
	}
	b.ropeTabs[key] = p
	return p
}

func (b *Backend) Attention(dst, q, k, v backend.Tensor, kv backend.KVStore, layer int, p backend.AttnParams) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.needStep("Attention")
	st, ok := kv.(*kvStore)
	if !ok {
		panic(fmt.Sprintf("cuda: KV store of type %T is not from the cuda backend", kv))
	}
	o, qt, kt, vt := b.tt(dst), b.tt(q), b.tt(k), b.tt(v)
	T := b.step.tokens
	if qt.rows != T || kt.rows != T || vt.rows != T || o.rows != T || p.KVHeads <= 0 || p.Heads%p.KVHeads != 0 ||
		qt.cols < p.Heads*p.HeadDim || kt.cols < p.KVHeads*p.HeadDim || p.HeadDim > 512 ||
		layer < 0 || layer >= len(st.k) || st.spec.Layers[layer].KVHeads != p.KVHeads || st.spec.Layers[layer].HeadDim != p.HeadDim {
		panic(fmt.Sprintf("cuda: Attention shapes: q %dx%d k %dx%d for %d tokens, params %+v", qt.rows, qt.cols, kt.rows, kt.cols, T, p))
	}
	if T == 0 {
		return
	}
	bs := st.spec.BlockSize
	kvw := p.KVHeads * p.HeadDim
	dense := qt.cols == p.Heads*p.HeadDim && o.cols == p.Heads*p.HeadDim
	// Decode steps of head dims 64/128: attn_decode serves a kv head's
	// whole query group and stores this step's K/V itself.
	dec := b.useDecAttn && b.step.decode && kt.cols == vt.cols && kt.cols == kvw && dense &&
		(p.HeadDim == 64 || p.HeadDim == 128) && p.Heads/p.KVHeads <= 8
	if dec {
		// About decSplitKeys keys per split block, by the longest context
		// rounded up to a power of two (so the launch, and its graph,
		// repeats until the context doubles), at most enough blocks to
		// fill the device twice: the last block merges the splits, and
		// 33 splits at 192 keys measured 20 us a call against ~8 us for
		// the generic kernel's 9.
		ctx := 64
		for ctx < b.step.maxCtx {
			ctx *= 2
		}
		G := p.Heads / p.KVHeads
		gl := G // query heads per block (head groups: decHeadsPerBlock, one-token steps)
		if T == 1 && b.decHeads > 0 && b.decHeads < G && G%b.decHeads == 0 {
			gl = b.decHeads
		}
		hb := T * p.KVHeads * (G / gl) // blocks per split
		splits := max(1, min(ctx/b.decSplitKeys, 64, (2*b.SMs+hb-1)/hb))
		// Counters: one per (token, head group) for the splits, then one
		// per (token, kv head) for the head groups.
		part, cnt, ok := b.splitScratch(T*p.Heads, splits, p.HeadDim, hb+T*p.KVHeads)
		if !ok {
			return
		}
		if cnt == 0 && gl < G {
			if cnt = b.counters(hb + T*p.KVHeads); cnt == 0 {
				return
			}
		}
		invf, half, rscale := b.takeRoPE(qt, kt, p)
		qn, kn, neps := b.takeHeadNorms(qt, kt, T, p)
		b.newLaunch(fmt.Sprintf("attn_decode_%d", p.HeadDim), p.KVHeads*(G/gl), T, splits, 128).p(o.ptr).p(part).p(qt.ptr).
			p(st.k[layer]).p(st.v[layer]).p(b.step.pos).p(b.step.tok2seq).p(b.step.btab).i(b.step.btStride).i(bs).
			i(p.Heads).i(p.KVHeads).f(p.Scale).i(p.Window).f(p.Softcap).p(kt.ptr).p(vt.ptr).i(kvw).p(cnt).
			p(invf).i(half).f(rscale).p(qn).p(kn).f(neps).i(gl)
		return
	}
	b.newLaunch("kv_store", T, 1, 1, min(256, roundUp(kvw, 32))).p(st.k[layer]).p(st.v[layer]).p(kt.ptr).p(vt.ptr).
		p(b.step.pos).p(b.step.tok2seq).p(b.step.btab).i(b.step.btStride).i(bs).i(p.KVHeads).i(p.HeadDim)
	// Prefill chunks: tensor-core flash attention over query tiles;
	// flash2 (dynamic shared memory) unless MLXCEL_CUDA_FLASHV=1 or the
	// device refused its shared memory. Head dims 256 and 512 have only
	// flash2 (the generic kernel when refused); at 512 two blocks of 64
	// rows serve each query tile.
	wide := p.HeadDim == 256 || p.HeadDim == 512
	if b.useFlash && !b.step.decode && b.step.maxLen >= 16 && b.step.consecutive && (p.HeadDim == 64 || p.HeadDim == 128 || wide && b.flash2[p.HeadDim]) && dense {
		name, threads, smem, grid := fmt.Sprintf("flash_attn_%d", p.HeadDim), 256, 0, b.step.ntiles
		if (b.flashV != 1 || wide) && b.flash2[p.HeadDim] {
			var rows int
			threads, rows, _, _ = flash2Geom(p.HeadDim)
			name, smem, grid = fmt.Sprintf("flash2_attn_%d", p.HeadDim), flash2Smem(p.HeadDim), b.step.ntiles*(flashTile/rows)
		}
		l := b.newLaunch(name, grid, p.Heads, 1, threads).p(o.ptr).p(qt.ptr).
			p(st.k[layer]).p(st.v[layer]).p(b.step.pos).p(b.step.tok2seq).p(b.step.btab).i(b.step.btStride).i(bs).
			i(p.Heads).i(p.KVHeads).f(p.Scale).i(p.Window).f(p.Softcap).p(b.step.tiles).i(qt.cols).i(o.cols)
		l.smem = uint32(smem)
		return
	}
	// The generic kernel, split as above; the last split block of each
	// (token, head) merges.
	splits := 1
	if work := T * p.Heads; work < 2*b.SMs {
		splits = min(32, (2*b.SMs+work-1)/work)
	}
	part, cnt, ok := b.splitScratch(T*p.Heads, splits, p.HeadDim, T*p.Heads)
	if !ok {
		return
	}
	b.newLaunch("attention", p.Heads, T, splits, 128).p(o.ptr).p(part).p(qt.ptr).p(st.k[layer]).p(st.v[layer]).
		p(b.step.pos).p(b.step.tok2seq).p(b.step.btab).i(b.step.btStride).i(bs).i(p.Heads).i(p.KVHeads).i(p.HeadDim).
		f(p.Scale).i(p.Window).f(p.Softcap).p(cnt)
}

// takeRoPE folds a just-recorded rope2 of this attention's q and k into
// attn_decode (which rotates both and writes them back): one launch fewer
// per layer and decode step. It returns the rope table, half the rotary
// dim and the cos/sin scale, or a zero table when nothing was folded.
func (b *Backend) takeRoPE(qt, kt *Tensor, p backend.AttnParams) (uintptr, int, float32) {
	n := len(b.rec.ls)
	if !b.fuse || !b.fuseRoPE || n == 0 {
		return 0, 0, 0
	}
	l := &b.rec.ls[n-1]
	arg := func(i int) int { return int(int32(l.args[i])) }
	// rope2's arguments: q, q heads, q stride, k, k stride, pos, table,
	// head dim, half, scale.
	if l.fn != b.fn("rope2") || uintptr(l.args[0]) != qt.ptr || arg(1) != p.Heads || arg(2) != qt.cols ||
		uintptr(l.args[3]) != kt.ptr || arg(4) != kt.cols || arg(7) != p.HeadDim {
		return 0, 0, 0
	}
	half := arg(8)
	if vpl := p.HeadDim / 32; half%vpl != 0 || 2*half > p.HeadDim {
		return 0, 0, 0
	}
	b.rec.ls = b.rec.ls[:n-1]
	return uintptr(l.args[6]), half, math.Float32frombits(uint32(l.args[9]))
}

// takeHeadNorms folds the per-head q and k RMSNorms (Qwen3's q_norm and
// k_norm, in place on the head rows) recorded just before attn_decode
// into it, after takeRoPE took the rotation that followed them: two
// launches fewer per layer and decode step. It returns the q and k norm
// weights (0: not folded) and their eps; folding needs the same eps and
// in-place norms of exactly the q and k rows.
func (b *Backend) takeHeadNorms(qt, kt *Tensor, T int, p backend.AttnParams) (qn, kn uintptr, eps float32) {
	if !b.fuse || !b.fuseNorm {
		return 0, 0, 0
	}
	epsSet := false
	for range 2 {
		n := len(b.rec.ls)
		if n == 0 {
			break
		}
		// rmsnorm's arguments: dst, x, w, cols, eps.
		l := &b.rec.ls[n-1]
		dst := uintptr(l.args[0])
		e := math.Float32frombits(uint32(l.args[4]))
		if l.fn != b.fn("rmsnorm") || uintptr(l.args[1]) != dst || int(int32(l.args[3])) != p.HeadDim ||
			l.args[2] == 0 || (epsSet && e != eps) {
			break
		}
		switch {
		case kn == 0 && dst == kt.ptr && int(l.gx) == T*p.KVHeads && kt.cols == p.KVHeads*p.HeadDim:
			kn = uintptr(l.args[2])
		case qn == 0 && dst == qt.ptr && int(l.gx) == T*p.Heads && qt.cols == p.Heads*p.HeadDim:
			qn = uintptr(l.args[2])
		default:
			return qn, kn, eps
		}
		eps, epsSet = e, true
		b.rec.ls = b.rec.ls[:n-1]
	}
	return qn, kn, eps
}

// decHeadsPerBlock is attn_decode's default number of query heads per
// block (MLXCEL_CUDA_DECHEADS overrides it; 0 keeps a kv head's whole
// group in one block): a group larger than this is split over blocks.
// Measured on the H200 (notes/cuda-kernels.md): Qwen3-30B-A3B (8 query
// heads per kv head) decodes at 288-291 tok/s with 2 or 4 against 243
// with 8; Llama-3.1-8B (4) through the ops 380 (2) and 386 (1) against 379.
// Only one-token steps take groups: at 16 sequences the launch is already
// 128 blocks wide, and serving at concurrency 16 fell from 1847 to
// 1669-1705 tok/s with them.
const decHeadsPerBlock = 2

// decSplitKeys is attn_decode's default target of keys per split block
// (MLXCEL_CUDA_DECSPLITKEYS overrides it): 4 warps take 4 keys each per
// round of loads, so 16 keys is one round. Measured at 192 keys (Llama-3.1-8B
// shapes, decode through the ops): 16 keys 368.8 tok/s, 32 360.5, 64 349.9,
// one split 270.6.
const decSplitKeys = 16

// splitScratch takes the partial results of rows (token, head) outputs of
// head dim hd split `splits` ways from the step arena, and nctr zeroed
// merge counters; nothing when there is one split. ok is false after a
// failure, which it records.
func (b *Backend) splitScratch(rows, splits, hd, nctr int) (part, cnt uintptr, ok bool) {
	if splits <= 1 {
		return 0, 0, true
	}
	part, err := b.arenaAlloc(rows * splits * (hd + 2) * 4)
	if err != nil {
		b.fail(err)
		return 0, 0, false
	}
	if cnt = b.counters(nctr); cnt == 0 {
		return 0, 0, false
	}
	return part, cnt, true
}

// counters returns n zeroed split counters for the decode attention
// kernel, which leaves them zero again after each launch.
func (b *Backend) counters(n int) uintptr {
	if n > b.cntN {
		unbind := b.bind()
		err := b.grow(&b.cntBuf, 4*n)
		unbind()
		if err != nil {
			b.fail(err)
			return 0
		}
		b.cntN = b.cntBuf.size / 4
		b.fill(b.cntBuf.ptr, 0, b.cntN) // bit pattern 0: integer zeros
	}
	return b.cntBuf.ptr
}

func (b *Backend) elementwise(name string, n int) *launch {
	return b.newLaunch(name, b.gridFor(n), 1, 1, 256)
}

func sameShape(ts ...*Tensor) bool {
	for _, t := range ts[1:] {
		if t.rows*t.cols != ts[0].rows*ts[0].cols {
			return false
		}
	}
	return true
}

func (b *Backend) GatedAct(dst, gate, up backend.Tensor, act backend.Activation) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d, g, u := b.tt(dst), b.tt(gate), b.tt(up)
	if !sameShape(d, g, u) {
		panic("cuda: GatedAct shape mismatch")
	}
	n := g.rows * g.cols
	if n == 0 {
		return
	}
	name := "gated_silu"
	switch act {
	case backend.SiLU:
	case backend.GELUTanh:
		name = "gated_gelu"
	default:
		panic("cuda: unknown activation")
	}
	if b.fuseGLU(d, g, u, act) {
		return
	}
	b.elementwise(name, n).p(d.ptr).p(g.ptr).p(u.ptr).i64(n).p(0)
}

func (b *Backend) Add(dst, a, c backend.Tensor) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d, x, y := b.tt(dst), b.tt(a), b.tt(c)
	if !sameShape(d, x, y) {
		panic("cuda: Add shape mismatch")
	}
	if n := x.rows * x.cols; n > 0 {
		b.elementwise("add_f32", n).p(d.ptr).p(x.ptr).p(y.ptr).i64(n)
	}
}

func (b *Backend) Scale(x backend.Tensor, s float32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.tt(x)
	if n := t.rows * t.cols; n > 0 {
		b.elementwise("scale_f32", n).p(t.ptr).f(s).i64(n)
	}
}

func (b *Backend) Softcap(x backend.Tensor, c float32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.tt(x)
	if n := t.rows * t.cols; n > 0 {
		b.elementwise("softcap_f32", n).p(t.ptr).f(c).i64(n)
	}
}

func (b *Backend) GatherLogitRows(dst, src backend.Tensor) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.needStep("GatherLogitRows")
	d, s := b.tt(dst), b.tt(src)
	L := b.step.logitRows
	if d.rows < L || d.cols != s.cols {
		panic(fmt.Sprintf("cuda: GatherLogitRows %d rows into %dx%d", L, d.rows, d.cols))
	}
	if L > 0 {
		b.newLaunch("gather_rows", L, 1, 1, min(256, roundUp(s.cols, 32))).p(d.ptr).p(s.ptr).p(b.step.rows).i(s.cols)
	}
}

// MoE: router GEMV, a routing kernel (softmax, top-k, renorm) that leaves
// expert ids and weights on the device, then the gated MLP of every
// token's chosen experts (GEMVs that pick their expert from the ids),
// summed with the routing weights into dst. Grouped (default): all k slots
// in one launch per projection (grid.z), so a decode step's MoE layer is 7
// launches instead of 2+5k (42 for Qwen3-MoE's k=8, where launches, not
// bytes, set the time: 52 tok/s). MLXCEL_CUDA_MOEGROUP=0: slot by slot.
// Each token still reads its experts' weights on its own (prefill of long
// prompts is slow: no grouped expert GEMM yet).
func (b *Backend) MoE(dst, x backend.Tensor, router backend.Weight, e backend.Experts, p backend.MoEParams) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d, s := b.tt(dst), b.tt(x)
	rw, gw, uw, dw := b.wt(router), b.wt(e.Gate), b.wt(e.Up), b.wt(e.Down)
	T, hidden, E, inter := s.rows, s.cols, rw.out, gw.out
	if d.rows != T || d.cols != hidden || rw.in != hidden || gw.experts != E || gw.in != hidden || dw.out != hidden ||
		dw.in != inter || p.TopK < 1 || p.TopK > 16 || p.TopK > E {
		panic(fmt.Sprintf("cuda: MoE shapes: x %dx%d router %v gate %v down %v top-%d", T, hidden, rw.shape, gw.shape, dw.shape, p.TopK))
	}
	if T == 0 {
		return
	}
	if b.moeGEMMApplies(s, gw, uw, dw, E, p.TopK) { // many tokens: grouped expert GEMM (ops_moe.go)
		b.moeGEMM(d, s, rw, gw, uw, dw, p)
		return
	}
	if b.moeDecode(d, s, rw, gw, uw, dw, p, 0) { // few tokens: three launches (ops_moe_decode.go)
		return
	}
	alloc := func(n int) uintptr {
		ptr, err := b.arenaAllocAny(n)
		if err != nil {
			b.fail(err)
		}
		return ptr
	}
	group := b.moeGroup
	slots := 1
	if group {
		slots = p.TopK
	}
	logits, idx, wts := alloc(T*E*4), alloc(T*p.TopK*4), alloc(T*p.TopK*4)
	g, u, y := alloc(slots*T*inter*4), alloc(slots*T*inter*4), alloc(slots*T*hidden*4)
	if b.err != nil {
		return
	}
	// The router is a plain GEMV, kept off cuBLAS and off the f16
	// tensor-core path: the top-k choice should see f32 logits.
	mma := b.useMMA
	b.useMMA = false
	for r := 0; r < T; r += 8 {
		m := min(8, T-r)
		b.gemv(logits+uintptr(r*E*4), s.ptr+uintptr(r*hidden*4), rw, 0, m, E, hidden, 0, 0, 0)
	}
	b.useMMA = mma
	renorm := 0
	if p.Renorm {
		renorm = 1
	}
	if group && E <= 1024 {
		b.newLaunch("moe_route_w", T, 1, 1, 32).p(logits).i(T).i(E).i(p.TopK).i(renorm).p(idx).p(wts)
	} else {
		b.newLaunch("moe_route", (T+127)/128, 1, 1, 128).p(logits).i(T).i(E).i(p.TopK).i(renorm).p(idx).p(wts)
	}
	act := "gated_silu"
	if p.Act == backend.GELUTanh {
		act = "gated_gelu"
	}
	if group {
		b.gemv(g, s.ptr, gw, 0, T, inter, hidden, idx, p.TopK, -1)
		b.gemv(u, s.ptr, uw, 0, T, inter, hidden, idx, p.TopK, -1)
		n := slots * T * inter
		b.elementwise(act, n).p(g).p(g).p(u).i64(n).p(0)
		b.gemv(y, g, dw, 0, T, hidden, inter, idx, p.TopK, -2)
		b.newLaunch("moe_sum", T, 1, 1, min(256, roundUp(hidden, 32))).p(d.ptr).p(y).p(wts).i(T).i(p.TopK).i(hidden)
		return
	}
	for k := 0; k < p.TopK; k++ {
		b.gemv(g, s.ptr, gw, 0, T, inter, hidden, idx, p.TopK, k)
		b.gemv(u, s.ptr, uw, 0, T, inter, hidden, idx, p.TopK, k)
		b.elementwise(act, T*inter).p(g).p(g).p(u).i64(T * inter).p(0)
		b.gemv(y, g, dw, 0, T, hidden, inter, idx, p.TopK, k)
		first := 0
		if k == 0 {
			first = 1
		}
		b.newLaunch("moe_accum", T, 1, 1, min(256, roundUp(hidden, 32))).p(d.ptr).p(y).p(wts).i(p.TopK).i(k).i(hidden).i(first)
	}
}

// arenaAllocAny takes op scratch from the step arena. Outside a step the
// arena is simply not rewound until the first BeginStep, which flushes
// everything recorded before it rewinds.
func (b *Backend) arenaAllocAny(n int) (uintptr, error) {
	if b.inStep {
		return b.arenaAlloc(n)
	}
	defer b.bind()()
	return b.arenaAlloc(n)
}

func (b *Backend) ReadRows(x backend.Tensor, out []float32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.tt(x)
	n := t.rows * t.cols
	if len(out) < n {
		panic(fmt.Sprintf("cuda: ReadRows of %d elements into %d", n, len(out)))
	}
	defer b.bind()()
	b.flush()
	if b.err == nil && n > 0 {
		b.fail(b.dtoh(unsafe.Pointer(&out[0]), t.ptr, 4*n))
	}
	if b.err != nil {
		for i := range out[:n] {
			out[i] = float32(math.NaN())
		}
	}
}

// Argmax runs on the device and copies back only the ids.
func (b *Backend) Argmax(x backend.Tensor) []int32 {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.tt(x)
	ids := make([]int32, t.rows)
	if t.rows == 0 {
		return ids
	}
	out, err := b.arenaAllocAny(4 * t.rows)
	if err != nil {
		b.fail(err)
		return ids
	}
	b.newLaunch("argmax_rows", t.rows, 1, 1, 1024).p(out).p(t.ptr).i(t.cols)
	defer b.bind()()
	b.flush()
	if b.err == nil {
		b.fail(b.dtoh(unsafe.Pointer(&ids[0]), out, 4*t.rows))
	}
	return ids
}
