//go:build linux

package cuda

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/mlxcel/mlxcel/internal/backend"
)

// One-row and few-row quantized products (the GEMV kernels of gemv.cu and
// mma.cu) and what folds into them at record time: q/k/v and gate/up
// launched together, the gated activation, a one-row norm and residual add.

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
	"qgemvm4_bf_v80", "qgemvm4_bf_v40", "qgemvm4_bf_v41", "qgemvm4_bf_v81", "qgemvm4_bf_v85", "qgemvm4_bf_v86", "qgemvm4_bf_v8n",
	"qgemvm4_bf_v120", "qgemvm4_bf_v160", "qgemvm4_bf_g64p", "qgemvm4_bf_g32p", "qgemvt4_bf", "qgemvt4_f32", "qgemvt4_bf_w4",
	"qgemvh4_bf", "qgemvh4_f32", "qgemvh4_bf_r16"}

// tcMinK is the shortest row the tensor-core one-row kernel (qgemvt4,
// gemv_tc.cu) takes: its 8 warps split K by 512-weight groups, so shorter
// rows leave warps idle. Off unless MLXCEL_CUDA_GEMVT=1 (measured slower
// than qgemvm).
const tcMinK = 4096

// tcWarps is QT_W of qgemvt4 kernel name (gemv_tc.cu): the warps of a
// block.
func tcWarps(name string) int {
	if strings.HasSuffix(name, "_w4") {
		return 4
	}
	return 8
}

// variantKernel names the benchmark variant MLXCEL_CUDA_GEMV1=v of the
// one-row 4-bit kernel: qgemvm4_bf_v<NR><PF>, or a row-group kernel
// (g64, g32) or its prefetching form (g64p, g32p) on any K.
func variantKernel(v string) string {
	if strings.HasPrefix(v, "g") {
		return "qgemvm4_bf_" + v
	}
	return "qgemvm4_bf_v" + v
}

// multiRowsOf is the rows a block of qgemvm kernel name takes: NR times
// the row groups a block (128 / lanes a group).
func multiRowsOf(name string) int {
	if strings.HasPrefix(name, "qgemvt") || strings.HasSuffix(name, "_r16") {
		return 16 // one mma tile; the 16-row f16x2 kernel
	}
	nr := 8
	if i := strings.LastIndex(name, "_v"); i >= 0 {
		v := name[i+2:]
		nr, _ = strconv.Atoi(v[:len(v)-1])
	}
	switch {
	case strings.Contains(name, "_g64"):
		nr *= 2
	case strings.Contains(name, "_g32"):
		nr *= 4
	}
	return nr
}

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
	var name string
	nr := 8 // the default kernels' NR
	if b.gemvTC && w.bits == 4 && w.gshft >= 6 && w.in%64 == 0 && w.in >= tcMinK && b.multiVariant == "" {
		name = "qgemvt4_" + w.sbName() // tensor cores: 16 rows a block
		if b.tcVariant != "" && !w.sbF32 {
			name += "_" + b.tcVariant
		}
		nr = 16
	} else if b.gemvHalf != "" && w.bits == 4 && rowGroupLanes(w.in, w.bits) == 128 && b.multiVariant == "" {
		name = "qgemvh4_" + w.sbName() // f16x2 arithmetic
		if b.gemvHalf == "16" && !w.sbF32 {
			name += "_r16"
		}
		nr = multiRowsOf(name)
	} else if s := b.streamKernel(w); s != "" && (w.bytes >= b.streamMin || b.joinsLaunch(b.fn(s), x, w)) {
		name = s // row groups of 8 rows, as qgemvm
	} else if w.bits == 4 && !w.sbF32 && b.multiVariant != "" {
		name = variantKernel(b.multiVariant) // benchmark variants
		nr = multiRowsOf(name)
	}
	var fn, fnFold uintptr
	if name == "" {
		d := b.defaultMulti(w)
		name, nr, fn, fnFold = d.name, d.rows, d.fn, d.fold
	} else {
		fn, fnFold = b.multiFns(name)
	}
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
				b.streamGrid(l)
				return
			}
		}
	}
	var nsrc, nw uintptr
	var eps float32
	if fnFold != 0 && b.folds.gemv {
		nsrc, nw, eps = b.takeNorm(x, w.in, w.bytes)
		if nsrc != 0 {
			name, fn = name+"_f", fnFold
		}
	}
	threads := 128
	if strings.HasPrefix(name, "qgemvt") {
		threads = 32 * tcWarps(name)
	}
	l := b.newLaunchFn(fn, name, nb, 1, 1, threads).p(x).i(w.in).i(w.gshft).p(y).p(w.w).p(w.sb).p(bias).i(w.out)
	for l.n < mNB0 {
		l.p(0)
	}
	l.i(nb).i(0).i(0).p(0).p(nsrc).p(nw).f(eps).p(0).p(0)
	b.streamGrid(l)
}

// joinsLaunch reports whether the launch just recorded is a fn launch on
// the same x and K that a product with w would join (gemvMulti): a small
// matrix after a streamed one streams too rather than launch again.
func (b *Backend) joinsLaunch(fn, x uintptr, w *weight) bool {
	n := len(b.rec.ls)
	if !b.fuse || n == 0 {
		return false
	}
	l := &b.rec.ls[n-1]
	return l.fn == fn && uintptr(l.args[mX]) == x && int(int32(l.args[mK])) == w.in && l.args[mGLU] == 0 &&
		l.args[mSeg0+2*mSegLen] == 0
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
	if !b.fuse || n == 0 || K%4 != 0 || bytes > foldNormMaxBytes { // the callers check b.folds
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

// isMoEDownSum reports whether fn is one of the moe_down_sum or moe_down_acc kernels (a
// set built once: this runs as each decode step is recorded).
func (b *Backend) isMoEDownSum(fn uintptr) bool {
	if b.downSumFns == nil {
		b.downSumFns = map[uintptr]bool{}
		for n, f := range b.fns {
			if strings.HasPrefix(n, "moe_down_sum") || strings.HasPrefix(n, "moe_down_acc") {
				b.downSumFns[f] = true
			}
		}
	}
	return b.downSumFns[fn]
}

// foldVariant is the _f kernel of a qgemvm kernel (itself for one), or 0.
func (b *Backend) foldVariant(fn uintptr) uintptr {
	if mi, ok := b.multiOf(fn); ok {
		return mi.fold
	}
	return 0
}

// multiInfo describes a qgemvm kernel (or its _f fold form): its base
// name, rows a block, handle and fold form (0 if none). Recording runs
// for every decode step while the device waits, so the peepholes' questions
// about a launch's kernel are answered from maps built once (multiOf,
// defaultMulti): looping over multiKernels with name concatenation and
// map lookups cost ~60 of the ~120 us a Llama-3.1-8B step took to record
// (BenchmarkRecordDecodeStep).
type multiInfo struct {
	name     string
	rows     int
	fn, fold uintptr
}

// multiOf reports the qgemvm kernel fn is, if it is one.
func (b *Backend) multiOf(fn uintptr) (multiInfo, bool) {
	if b.multiByFn == nil {
		b.multiByFn = map[uintptr]multiInfo{}
		for _, c := range multiKernels {
			mi := multiInfo{name: c, rows: multiRowsOf(c), fn: b.fns[c], fold: b.fns[c+"_f"]}
			if f := b.fns[c]; f != 0 {
				b.multiByFn[f] = mi
			}
			if mi.fold != 0 {
				b.multiByFn[mi.fold] = mi
			}
		}
	}
	mi, ok := b.multiByFn[fn]
	return mi, ok
}

// multiFns returns the kernel handles of qgemvm kernel name and its _f
// form (0 if none).
func (b *Backend) multiFns(name string) (fn, fold uintptr) {
	fn = b.fn(name)
	mi, _ := b.multiOf(fn) // not a qgemvm kernel (qgemvs): no fold form
	return fn, mi.fold
}

// defaultMulti is the default qgemvm kernel for w's bits, scale type and
// row length (row groups for short rows) and its rows a block, memoized.
// The memo is indexed [bits 4 or 8][bf16 or f32 scales][128, 64 or 32
// lanes a row group] (gemv sends only 4 and 8 bits here).
func (b *Backend) defaultMulti(w *weight) multiInfo {
	lanes := rowGroupLanes(w.in, w.bits)
	bi, si, li := 0, 0, 0
	switch lanes {
	case 64:
		li = 1
	case 32:
		li = 2
	}
	if w.bits == 8 {
		bi = 1
	}
	if w.sbF32 {
		si = 1
	}
	mi := &b.multiDefaults[bi][si][li]
	if mi.name == "" {
		name := fmt.Sprintf("qgemvm%d_%s", w.bits, w.sbName()) + rowGroupSuffix(w.in, w.bits)
		fn, fold := b.multiFns(name)
		*mi = multiInfo{name: name, rows: multiRows * 128 / lanes, fn: fn, fold: fold}
	}
	return *mi
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
	if b.isStream(l.fn) {
		name = "stream" // qgemvs: row groups of 8 rows, as qgemvm
	}
	if mi, ok := b.multiOf(l.fn); ok {
		name, nr = mi.name, mi.rows
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
	b.streamGrid(l)
	return true
}
