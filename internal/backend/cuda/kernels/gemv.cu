// Matrix-vector products for 1..8 activation rows per launch row-chunk:
// y[m, n] = sum_k x[m, k] * W[n, k] (+ bias[n]). Decode is bound by the
// bytes of W, so each warp streams NR weight rows once and applies them to
// all MR activation rows, which it keeps in registers word by word.
//
// Lane l reads words l, l+32, ... of a row: every warp load is one
// coalesced 128-byte line, and the activations a word needs (8 floats at 4
// bits) are contiguous, so the x loads of a warp are coalesced too.
//
// With eidx set (MoE experts), blockIdx.y is a token t whose weights are
// expert eidx[t*topk+eslot] of a stacked [E, N, K] matrix, and MR is 1.

// Both fast kernels split K over the GW warps of a block (warp w takes the
// 32-word chunks w, w+GW, ...) and reduce through shared memory at the end:
// a decode GEMV of a 4096-row matrix then has 8 warps per 4 rows in flight
// instead of one, which is what hides the memory latency (v1 ran one warp
// per 4 rows down the whole of K and was latency-bound: 0.1-0.3 of the copy
// rate).
#define GW 8

// unpack turns one packed word into EPW floats. 4 bits: the nibbles are
// masked to bits 3-6 of each byte, and one byte permute drops a byte into
// bits 16-23 of 0.5f (0x3F000000), so q lands in the top mantissa bits:
// the float is 0.5 + q/32 exactly. The kernel removes the 0.5 with the
// chunk's x-sum (dq = 32*sum(x*f) - 16*sum(x)), so a weight costs one PRMT
// and one FMA. (v3 put q in bits 16-19, 0.5 + q/256: the subtraction then
// cancelled ~4 bits and the error reached 1e-5 of the f32 reference.)
// 8 bits: the byte goes into the low bits of 2^23 and a subtraction leaves
// q exactly (the 0.5 trick would lose 8 bits to cancellation there).
template <int BITS> DEV void unpack(u32 v, float* q);
template <> DEV void unpack<4>(u32 v, float* q) {
    u32 lo = (v << 3) & 0x78787878u, hi = (v >> 1) & 0x78787878u;
    q[0] = __uint_as_float(__byte_perm(lo, 0x3F000000u, 0x7044));
    q[1] = __uint_as_float(__byte_perm(hi, 0x3F000000u, 0x7044));
    q[2] = __uint_as_float(__byte_perm(lo, 0x3F000000u, 0x7144));
    q[3] = __uint_as_float(__byte_perm(hi, 0x3F000000u, 0x7144));
    q[4] = __uint_as_float(__byte_perm(lo, 0x3F000000u, 0x7244));
    q[5] = __uint_as_float(__byte_perm(hi, 0x3F000000u, 0x7244));
    q[6] = __uint_as_float(__byte_perm(lo, 0x3F000000u, 0x7344));
    q[7] = __uint_as_float(__byte_perm(hi, 0x3F000000u, 0x7344));
}
template <> DEV void unpack<8>(u32 v, float* q) {
    q[0] = __uint_as_float(__byte_perm(v, 0x4B000000u, 0x7440)) - 8388608.f;
    q[1] = __uint_as_float(__byte_perm(v, 0x4B000000u, 0x7441)) - 8388608.f;
    q[2] = __uint_as_float(__byte_perm(v, 0x4B000000u, 0x7442)) - 8388608.f;
    q[3] = __uint_as_float(__byte_perm(v, 0x4B000000u, 0x7443)) - 8388608.f;
}

// unpack_fp: the floating-point modes' codes of one word as fp_h16's
// scaled values (SBfp's scales undo the scaling), two at a time: each
// step moves one code into the top of each 16-bit half (its sign on the
// f16's sign bit) and its exponent and mantissa bits under them with one
// more shift, as f16x2; then two f16 -> f32 conversions. 4 bits: step k
// takes codes k and k+4; 8 bits: bytes 1 and 3, then 0 and 2.
DEV void h2f(u32 h, float& lo, float& hi) { lo = f16f((u16)(h & 0xffffu)); hi = f16f((u16)(h >> 16)); }
// fp4x2_h16 is fp_h16 of codes k and k+4 of word v (bits 4k..4k+3 and
// 16+4k..), as f16x2: each code's sign moved onto its half's sign bit and
// its exponent and mantissa bits under it (k a constant after unrolling;
// the tensor-core kernels, mma.cu, take the pair as an A operand).
DEV u32 fp4x2_h16(u32 v, int k) {
    return ((k == 3 ? v : v << (12 - 4 * k)) & 0x80008000u) | ((k == 3 ? v >> 3 : v << (9 - 4 * k)) & 0x0E000E00u);
}
template <int BITS> DEV void unpack_fp(u32 v, float* q);
template <> DEV void unpack_fp<4>(u32 v, float* q) {
    h2f(fp4x2_h16(v, 3), q[3], q[7]);
    h2f(fp4x2_h16(v, 2), q[2], q[6]);
    h2f(fp4x2_h16(v, 1), q[1], q[5]);
    h2f(fp4x2_h16(v, 0), q[0], q[4]);
}
template <> DEV void unpack_fp<8>(u32 v, float* q) {
    h2f((v & 0x80008000u) | ((v >> 1) & 0x3F803F80u), q[1], q[3]);
    h2f(((v << 8) & 0x80008000u) | ((v << 7) & 0x3F803F80u), q[0], q[2]);
}
// unpackw is the unpack of scale type SB's weights: the affine codes
// (unpack, whose 4-bit values carry the 0.5 offset that affine_fix
// removes) or the floating-point ones (unpack_fp, no offset).
template <int BITS, class SB>
DEV void unpackw(u32 v, float* q) {
    if constexpr (SB::fp) unpack_fp<BITS>(v, q);
    else unpack<BITS>(v, q);
}
// affine_fix: sum(x*q) from the sum d of x times unpack<4>'s 0.5 + q/32
// (sx = sum(x)); nothing to do for 8 bits and the floating-point codes.
template <int BITS, class SB>
DEV float affine_fix(float d, float sx) {
    if constexpr (BITS == 4 && !SB::fp) return fmaf(32.f, d, -16.f * sx);
    else return d;
}
// sb_fma adds a group's s*d + b*sx to acc (b*sx is the affine bias
// folded into the sums; the floating-point modes have none).
template <class SB>
DEV float sb_fma(float acc, float s, float b, float d, float sx) {
    if constexpr (SB::fp) return fmaf(s, d, acc);
    else return fmaf(s, d, fmaf(b, sx, acc));
}

// (No __restrict__: rebase() takes the pointers by reference.)
#define GEMV_PARAMS                                                                              \
    float *y, const float *x, const u32 *w, const u32 *sb, const float *bias, int N, int K, int M, \
        int gshift, int ldy, int ldx, const int *eidx, int topk, int eslot, long long wstride,     \
        long long sbstride
#define GEMV_ARGS y, x, w, sb, bias, N, K, M, gshift, ldy, ldx, eidx, topk, eslot, wstride, sbstride

// rebase points the operands at this block's row chunk or expert.
// Grouped experts (MoE): eslot < 0 takes the slot from blockIdx.z and the
// output from slab [slot][t] of y ([topk][T][ldy]); eslot == -2 also reads
// x per slot (the down projection of each slot's gated activation), -1
// shares x across slots (gate and up read the token's row).
DEV void rebase(float*& y, const float*& x, const u32*& w, const u32*& sb, int& M, int MR, int ldy, int ldx,
                const int* eidx, int topk, int eslot, long long wstride, long long sbstride) {
    int t = blockIdx.y;
    if (eidx) {
        if (eslot < 0) {
            const int slot = blockIdx.z;
            y += (long long)slot * gridDim.y * ldy;
            if (eslot == -2) x += (long long)slot * gridDim.y * ldx;
            eslot = slot;
        }
        int e = eidx[t * topk + eslot];
        w += e * wstride;
        sb += e * sbstride;
        x += (long long)t * ldx;
        y += (long long)t * ldy;
        M = 1;
    } else {
        x += (long long)t * MR * ldx;
        y += (long long)t * MR * ldy;
        M -= t * MR;
        if (M > MR) M = MR;
    }
}

// qgemv v3: each lane loads 16-byte chunks (32 weights at 4 bits, 16 at 8)
// of NR rows, so a warp keeps NR*512 bytes in flight per step (v2 loaded 4
// bytes per lane and kept too few bytes in flight: 0.3-0.4 of the copy
// rate). A chunk lies inside one quantization group (groups are >= 32), so
// it needs one scale/bias load. The activations of a chunk are 32 floats
// per lane, read from L1; a lane's chunk is contiguous, so a warp's x load
// touches 32 lines, which L1 serves at about twice the rate the weights
// need when NR rows share it. QW warps split K.
#define QW 4

// Row groups (template argument L, lanes per group): short rows (fewer
// than 96 16-byte chunks: K < 3072 at 4 bits, as in MoE experts of
// 768 x 2048 and 2048 x 768, or a 2048-wide model's projections) would
// leave most lanes of a block that splits K four warps wide idle (24 of
// 128 at K = 768), so the _g64/_g32 kernels give each group of L lanes its
// own NR rows, 128/L groups per block. The Go side picks the kernel and
// sizes the grid (rowGroupLanes).

// finish sums each accumulator over the warps of its row group (L lanes,
// L/32 warps; by default the whole block of NW warps) and writes y.
template <int NR, int MR, int NW, int L = 32 * NW>
DEV void finish(float (&acc)[NR][MR], float* y, const float* bias, int row0, int N, int M, int ldy) {
    __shared__ float red[NW][NR * MR];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int r = 0; r < NR; r++)
#pragma unroll
        for (int m = 0; m < MR; m++) {
            float v = warp_sum(acc[r][m]);
            if (lane == 0) red[warp][r * MR + m] = v;
        }
    __syncthreads();
    constexpr int wpg = L / 32;
    const int w0 = L == 32 * NW ? 0 : (threadIdx.x / L) * wpg;
    for (int i = threadIdx.x % L; i < NR * MR; i += L) {
        int r = i / MR, m = i - r * MR;
        float v = 0.f;
        for (int g = 0; g < wpg; g++) v += red[w0 + g][i];
        if (row0 + r < N && m < M) y[(long long)m * ldy + row0 + r] = v + (bias ? bias[row0 + r] : 0.f);
    }
}

// load_chunk loads chunk c (16 bytes) of NR weight rows and the scale and
// bias of the group it lies in.
template <int BITS, class SB, int NR>
DEV void load_chunk(uint4 (&wv)[NR], typename SB::raw (&sv)[NR], const uint4* const (&wr)[NR], const u32* const (&sr)[NR],
                    int c, int gshift) {
#pragma unroll
    for (int r = 0; r < NR; r++) wv[r] = wr[r][c];
#pragma unroll
    for (int r = 0; r < NR; r++) sv[r] = SB::load(sr[r], (c * (128 / BITS)) >> gshift);
}

// dotchunk is sum(x*q) over one 16-byte chunk of a row (sx = sum(x)), or
// over its words W0..W0+NW-1 (SBfp2: each half of the chunk has its own
// scale).
template <int BITS, class SB, int W0 = 0, int NW = 4>
DEV float dotchunk(uint4 wv, const float* xv, float sx) {
    constexpr int EPW = 32 / BITS;
    u32 wd[4] = {wv.x, wv.y, wv.z, wv.w};
    float d0 = 0.f, d1 = 0.f; // two chains for ILP
#pragma unroll
    for (int i = W0; i < W0 + NW; i++) {
        float q[EPW];
        unpackw<BITS, SB>(wd[i], q);
#pragma unroll
        for (int e = 0; e < EPW; e += 2) {
            d0 = fmaf(xv[i * EPW + e], q[e], d0);
            d1 = fmaf(xv[i * EPW + e + 1], q[e + 1], d1);
        }
    }
    // 4 bits affine: d summed x*(0.5 + q/32); 32*d - 16*sum(x) = sum(x*q).
    return affine_fix<BITS, SB>(d0 + d1, sx);
}

// chunk_fma adds one 16-byte chunk of NR weight rows (wv, their group's
// scale and bias sv), applied to the chunk's activations xv, to the row
// sums acc[r * S]: s*sum(x*q) + b*sum(x), the affine dequantization
// folded into the sums.
template <int BITS, class SB, int NR, int S = 1>
DEV void chunk_fma(float* acc, const uint4 (&wv)[NR], const typename SB::raw (&sv)[NR], const float* xv) {
    constexpr int EPC = 128 / BITS;
    float sx0 = 0.f, sx1 = 0.f;
#pragma unroll
    for (int e = 0; e < EPC; e += 2) { sx0 += xv[e]; sx1 += xv[e + 1]; }
    const float sx = sx0 + sx1;
#pragma unroll
    for (int r = 0; r < NR; r++) {
        if constexpr (SB::pair) { // a group's scale for each half of the chunk
            float sl, sh, b;
            SB::get(sv[r], sl, b);
            SB::get(SB::sel(sv[r], 16), sh, b);
            const float dl = dotchunk<BITS, SB, 0, 2>(wv[r], xv, sx), dh = dotchunk<BITS, SB, 2, 2>(wv[r], xv, sx);
            acc[r * S] = fmaf(sh, dh, fmaf(sl, dl, acc[r * S]));
        } else {
            float d = dotchunk<BITS, SB>(wv[r], xv, sx), s, b;
            SB::get(sv[r], s, b);
            acc[r * S] = sb_fma<SB>(acc[r * S], s, b, d, sx);
        }
    }
}

template <int BITS, class SB, int MR, int NR, int L = 32 * QW>
DEV void qgemv_impl(GEMV_PARAMS) {
    constexpr int EPW = 32 / BITS, EPC = 4 * EPW; // elements per word, per 16-byte chunk
    grid_dep_launch();
    if (eidx) grid_dep_wait(); // the expert ids come from the routing kernel
    rebase(y, x, w, sb, M, MR, ldy, ldx, eidx, topk, eslot, wstride, sbstride);
    const int nc = K / EPC, ng = K >> gshift;
    // grp is 0 in a whole-block group, written so: the compiler then keeps
    // the row pointers in uniform registers (a per-thread row cost ~40
    // registers in the qgemvm kernels).
    const int li = threadIdx.x % L, grp = L == 32 * QW ? 0 : threadIdx.x / L;
    const int row0 = (blockIdx.x * (32 * QW / L) + grp) * NR;
    const uint4* wr[NR];
    const u32* sr[NR];
#pragma unroll
    for (int r = 0; r < NR; r++) {
        int rr = min(row0 + r, N - 1);
        wr[r] = reinterpret_cast<const uint4*>(w + (long long)rr * (K / EPW));
        sr[r] = sb + (long long)rr * ng * (sizeof(typename SB::raw) / 4);
    }
    // Weights do not depend on the previous kernel: start pulling this
    // lane's chunks into L2 while that kernel finishes (PDL), then wait
    // for x.
    for (int c = li; c < nc; c += L)
#pragma unroll
        for (int r = 0; r < NR; r++) prefetch_l2(wr[r] + c);
    grid_dep_wait();
    float acc[NR][MR];
#pragma unroll
    for (int r = 0; r < NR; r++)
#pragma unroll
        for (int m = 0; m < MR; m++) acc[r][m] = 0.f;

    for (int c = li; c < nc; c += L) {
        uint4 wv[NR];
        typename SB::raw sv[NR];
        load_chunk<BITS, SB, NR>(wv, sv, wr, sr, c, gshift);
#pragma unroll
        for (int m = 0; m < MR; m++) {
            float xv[EPC];
            const float4* xp = reinterpret_cast<const float4*>(x + (long long)min(m, M - 1) * ldx + c * EPC);
#pragma unroll
            for (int i = 0; i < EPC / 4; i++) {
                float4 f = xp[i];
                xv[4 * i] = f.x; xv[4 * i + 1] = f.y; xv[4 * i + 2] = f.z; xv[4 * i + 3] = f.w;
            }
            chunk_fma<BITS, SB, NR, MR>(&acc[0][m], wv, sv, xv);
        }
    }
    finish<NR, MR, QW, L>(acc, y, bias, row0, N, M, ldy);
}

// qgemv_multi: one activation row against up to three matrices that share
// x and K (a layer's q, k and v projections, or gate and up), in one
// launch: blocks [0, nb0) take matrix 0, then matrix 1, then matrix 2. With
// glu set (gate and up), each block takes the same NR/2 rows of both and
// also writes d = act(gate) * up, the gated activation, so the MLP's three
// ops cost one launch. Recorded by the Go side when consecutive Linear
// calls (and a GatedAct) allow it; every output the separate ops would
// write is still written.
//
#define QMULTI_PARAMS                                                                                             \
    const float *x, int K, int gshift, float *y0, const u32 *w0, const u32 *sb0, const float *bias0, int N0,    \
        float *y1, const u32 *w1, const u32 *sb1, const float *bias1, int N1, float *y2, const u32 *w2,            \
        const u32 *sb2, const float *bias2, int N2, int nb0, int nb1, int glu, float *d
#define QMULTI_ARGS x, K, gshift, y0, w0, sb0, bias0, N0, y1, w1, sb1, bias1, N1, y2, w2, sb2, bias2, N2, nb0, nb1, glu, d
// multi_rows points wr/sr at the NR weight rows (and their scale rows) of
// row group grp of block bx (RG groups a block) in a qgemvm launch, and
// gives the first output row and the rows of its matrix: with glu, rows
// [row0, row0+NR/2) of gate then the same rows of up; otherwise NR rows
// of matrix 0, 1 or 2 (nb0 blocks of matrix 0 first, then nb1 blocks of
// matrix 1, then matrix 2).
template <int BITS, class SB, int NR>
DEV void multi_rows(int bx, int grp, int RG, QMULTI_PARAMS, const uint4* (&wr)[NR], const u32* (&sr)[NR], int& row0,
                    int& Na) {
    constexpr int EPW = 32 / BITS, SBW = sizeof(typename SB::raw) / 4;
    const int ng = K >> gshift, nw = K / EPW;
    const u32 *wa = w0, *sa = sb0;
    Na = N0;
    if (glu) {
        row0 = (bx * RG + grp) * (NR / 2);
    } else if (bx < nb0) {
        row0 = (bx * RG + grp) * NR;
    } else if (bx < nb0 + nb1) {
        wa = w1, sa = sb1, Na = N1, row0 = ((bx - nb0) * RG + grp) * NR;
    } else {
        wa = w2, sa = sb2, Na = N2, row0 = ((bx - nb0 - nb1) * RG + grp) * NR;
    }
#pragma unroll
    for (int r = 0; r < NR; r++) {
        bool second = glu && r >= NR / 2;
        int rr = min(row0 + (second ? r - NR / 2 : r), Na - 1);
        wr[r] = reinterpret_cast<const uint4*>((second ? w1 : wa) + (long long)rr * nw);
        sr[r] = (second ? sb1 : sa) + (long long)rr * ng * SBW;
    }
}

// glu_act is the gate's activation in a fused gate/up product (glu is
// gate_act's code).
DEV float glu_act(int glu, float g) { return gate_act(glu, g); }

template <int BITS, class SB, int NR, int L = 32 * QW>
DEV void qgemv_multi_impl(QMULTI_PARAMS) {
    constexpr int EPW = 32 / BITS, EPC = 4 * EPW;
    const int nc = K / EPC;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    grid_dep_launch();
    // Row groups as in qgemv_impl: RG groups of L lanes, each its own rows.
    const int li = threadIdx.x % L, grp = L == 32 * QW ? 0 : threadIdx.x / L, RG = 32 * QW / L;
    const int bx = blockIdx.x;
    const uint4* wr[NR];
    const u32* sr[NR];
    int row0, Na;
    multi_rows<BITS, SB, NR>(bx, grp, RG, QMULTI_ARGS, wr, sr, row0, Na);
    float acc[NR];
#pragma unroll
    for (int r = 0; r < NR; r++) acc[r] = 0.f;
    uint4 wv[NR];
    typename SB::raw sv[NR];
    int c = li;
    if (c < nc) {
        load_chunk<BITS, SB, NR>(wv, sv, wr, sr, c, gshift);
    }
    // The first chunk's weights are in flight; x comes from the previous
    // kernel (PDL: this block may have started before it finished).
    grid_dep_wait();
    for (; c < nc; c += L) {
        const int cn = c + L;
        float xv[EPC];
        const float4* xp = reinterpret_cast<const float4*>(x + c * EPC);
#pragma unroll
        for (int i = 0; i < EPC / 4; i++) {
            float4 f = xp[i];
            xv[4 * i] = f.x; xv[4 * i + 1] = f.y; xv[4 * i + 2] = f.z; xv[4 * i + 3] = f.w;
        }
        chunk_fma<BITS, SB, NR>(acc, wv, sv, xv);
        if (cn < nc) {
#pragma unroll
            for (int r = 0; r < NR; r++) {
                wv[r] = wr[r][cn];
                sv[r] = SB::load(sr[r], (cn * EPC) >> gshift);
            }
        }
    }
    __shared__ float red[QW][NR];
#pragma unroll
    for (int r = 0; r < NR; r++) {
        float v = warp_sum(acc[r]);
        if (lane == 0) red[warp][r] = v;
    }
    __syncthreads();
    constexpr int wpg = L / 32;
    const int wg0 = grp * wpg; // this row group's warps
    if (glu) {
        if (li < NR / 2) {
            int r = li, row = row0 + r;
            float g = 0.f, u = 0.f;
            for (int k = wg0; k < wg0 + wpg; k++) { g += red[k][r]; u += red[k][r + NR / 2]; }
            if (row < N0) {
                g += bias0 ? bias0[row] : 0.f;
                u += bias1 ? bias1[row] : 0.f;
                y0[row] = g;
                y1[row] = u;
                d[row] = glu_act(glu, g) * u;
            }
        }
        return;
    }
    float* y = bx < nb0 ? y0 : bx < nb0 + nb1 ? y1 : y2;
    const float* bias = bx < nb0 ? bias0 : bx < nb0 + nb1 ? bias1 : bias2;
    if (li < NR) {
        int r = li, row = row0 + r;
        float v = 0.f;
        for (int k = wg0; k < wg0 + wpg; k++) v += red[k][r];
        if (row < Na) {
            v += bias ? bias[row] : 0.f;
            y[row] = v;
        }
    }
}
// The kernels by bits and scale type, with the row-group forms for short
// rows (Go: rowGroupLanes): NR = 8 rows a row group, no prefetch, which
// measured fastest on every decode shape (notes/cuda-kernels.md, v4).
#define QMULTI(NAME, BITS, SBT) QMULTI_G(NAME, BITS, SBT, 32 * QW)
#define QMULTI_G(NAME, BITS, SBT, L)                                                    \
    extern "C" __global__ void __launch_bounds__(32 * QW) NAME(QMULTI_PARAMS) {         \
        qgemv_multi_impl<BITS, SBT, 8, L>(QMULTI_ARGS);                                 \
    }
QMULTI(qgemvm4_bf, 4, SBbf) QMULTI(qgemvm4_f32, 4, SBf32)
QMULTI(qgemvm8_bf, 8, SBbf) QMULTI(qgemvm8_f32, 8, SBf32)
QMULTI_G(qgemvm4_bf_g64, 4, SBbf, 64) QMULTI_G(qgemvm4_f32_g64, 4, SBf32, 64)
QMULTI_G(qgemvm8_bf_g64, 8, SBbf, 64) QMULTI_G(qgemvm8_f32_g64, 8, SBf32, 64)
QMULTI_G(qgemvm4_bf_g32, 4, SBbf, 32) QMULTI_G(qgemvm4_f32_g32, 4, SBf32, 32)
QMULTI_G(qgemvm8_bf_g32, 8, SBbf, 32) QMULTI_G(qgemvm8_f32_g32, 8, SBf32, 32)
// The floating-point modes: SBfp (mxfp4 and mxfp8: groups of 32 hold
// whole chunks) and SBfp2 (nvfp4 with rows of whole 32-element pairs of
// groups: a scale word a chunk).
//kernels:part
QMULTI(qgemvm4_fp, 4, SBfp) QMULTI(qgemvm8_fp, 8, SBfp)
QMULTI_G(qgemvm4_fp_g64, 4, SBfp, 64) QMULTI_G(qgemvm8_fp_g64, 8, SBfp, 64)
QMULTI_G(qgemvm4_fp_g32, 4, SBfp, 32) QMULTI_G(qgemvm8_fp_g32, 8, SBfp, 32)
QMULTI(qgemvm4_fp2, 4, SBfp2) QMULTI_G(qgemvm4_fp2_g64, 4, SBfp2, 64) QMULTI_G(qgemvm4_fp2_g32, 4, SBfp2, 32)

// qgemv_rows (2..8 activation rows): one warp streams NR weight rows down
// the whole of K, 4 bytes per lane per row, and applies each word to all MR
// activation rows held in registers (the v1 layout, which measured best
// for several rows: the math per weight grows with MR, and v3's 16-byte
// chunks then need too many registers).
template <int BITS, class SB, int MR, int NR, int J>
DEV void qgemv_rows_impl(GEMV_PARAMS) {
    constexpr int EPW = 32 / BITS;
    rebase(y, x, w, sb, M, MR, ldy, ldx, eidx, topk, eslot, wstride, sbstride);
    const int nw = K / EPW, ng = K >> gshift;
    const int lane = threadIdx.x & 31;
    const int row0 = (blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5)) * NR;
    if (row0 >= N) return;
    const u32* wr[NR];
    const u32* sr[NR];
#pragma unroll
    for (int r = 0; r < NR; r++) {
        int rr = min(row0 + r, N - 1);
        wr[r] = w + (long long)rr * nw;
        sr[r] = sb + (long long)rr * ng * (sizeof(typename SB::raw) / 4);
    }
    const float* xr[MR];
#pragma unroll
    for (int m = 0; m < MR; m++) xr[m] = x + (long long)min(m, M - 1) * ldx;
    float acc[NR][MR];
#pragma unroll
    for (int r = 0; r < NR; r++)
#pragma unroll
        for (int m = 0; m < MR; m++) acc[r][m] = 0.f;
    for (int base = 0; base < nw; base += 32 * J) {
        u32 wv[NR][J];
        typename SB::raw sv[NR][J];
#pragma unroll
        for (int j = 0; j < J; j++) {
            int wi = base + lane + 32 * j;
            int wc = wi < nw ? wi : nw - 1;
#pragma unroll
            for (int r = 0; r < NR; r++) wv[r][j] = wr[r][wc];
#pragma unroll
            for (int r = 0; r < NR; r++) sv[r][j] = SB::load(sr[r], (wc * EPW) >> gshift);
        }
#pragma unroll
        for (int j = 0; j < J; j++) {
            int wi = base + lane + 32 * j;
            if (wi >= nw) break;
            float xv[MR][EPW], sx[MR];
#pragma unroll
            for (int m = 0; m < MR; m++) {
                const float4* xp = reinterpret_cast<const float4*>(xr[m] + wi * EPW);
#pragma unroll
                for (int i = 0; i < EPW / 4; i++) {
                    float4 f = xp[i];
                    xv[m][4 * i] = f.x; xv[m][4 * i + 1] = f.y; xv[m][4 * i + 2] = f.z; xv[m][4 * i + 3] = f.w;
                }
                float s = 0.f;
#pragma unroll
                for (int e = 0; e < EPW; e++) s += xv[m][e];
                sx[m] = s;
            }
#pragma unroll
            for (int r = 0; r < NR; r++) {
                float q[EPW], s, b;
                unpackw<BITS, SB>(wv[r][j], q);
                SB::get(SB::sel(sv[r][j], wi * EPW), s, b);
#pragma unroll
                for (int m = 0; m < MR; m++) {
                    float d = 0.f;
#pragma unroll
                    for (int e = 0; e < EPW; e++) d = fmaf(xv[m][e], q[e], d);
                    acc[r][m] = sb_fma<SB>(acc[r][m], s, b, affine_fix<BITS, SB>(d, sx[m]), sx[m]);
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < NR; r++)
#pragma unroll
        for (int m = 0; m < MR; m++) {
            float v = warp_sum(acc[r][m]);
            if (lane == 0 && row0 + r < N && m < M) y[(long long)m * ldy + row0 + r] = v + (bias ? bias[row0 + r] : 0.f);
        }
}

// MR = 1: v3 (chunks, split K; also the MoE expert path). MR >= 2: rows.
#define QGEMV1G(BITS, SBN, SBT, SUFFIX, L)                                                              \
    extern "C" __global__ void __launch_bounds__(32 * QW) qgemv##BITS##_##SBN##_1##SUFFIX(GEMV_PARAMS) { \
        qgemv_impl<BITS, SBT, 1, 8, L>(GEMV_ARGS);                                                      \
    }
#define QGEMV1(BITS, SBN, SBT) \
    QGEMV1G(BITS, SBN, SBT, , 32 * QW) QGEMV1G(BITS, SBN, SBT, _g64, 64) QGEMV1G(BITS, SBN, SBT, _g32, 32)
#define QGEMVR(BITS, SBN, SBT, MR, J)                                                         \
    extern "C" __global__ void __launch_bounds__(128) qgemv##BITS##_##SBN##_##MR(GEMV_PARAMS) {  \
        grid_dep_start();                                                                     \
        qgemv_rows_impl<BITS, SBT, MR, 4, J>(GEMV_ARGS);                                      \
    }
//kernels:part
QGEMV1(4, bf, SBbf) QGEMV1(4, f32, SBf32) QGEMV1(8, bf, SBbf) QGEMV1(8, f32, SBf32)
QGEMVR(4, bf, SBbf, 2, 4) QGEMVR(4, bf, SBbf, 4, 2) QGEMVR(4, bf, SBbf, 8, 1)
QGEMVR(4, f32, SBf32, 2, 4) QGEMVR(4, f32, SBf32, 4, 2) QGEMVR(4, f32, SBf32, 8, 1)
QGEMVR(8, bf, SBbf, 2, 4) QGEMVR(8, bf, SBbf, 4, 2) QGEMVR(8, bf, SBbf, 8, 1)
QGEMVR(8, f32, SBf32, 2, 4) QGEMVR(8, f32, SBf32, 4, 2) QGEMVR(8, f32, SBf32, 8, 1)
//kernels:part
QGEMV1(4, fp, SBfp) QGEMV1(8, fp, SBfp) QGEMV1(4, fp2, SBfp2)
QGEMVR(4, fp, SBfp, 2, 4) QGEMVR(4, fp, SBfp, 4, 2) QGEMVR(4, fp, SBfp, 8, 1)
QGEMVR(8, fp, SBfp, 2, 4) QGEMVR(8, fp, SBfp, 4, 2) QGEMVR(8, fp, SBfp, 8, 1)
QGEMVR(4, fp2, SBfp2, 2, 4) QGEMVR(4, fp2, SBfp2, 4, 2) QGEMVR(4, fp2, SBfp2, 8, 1)

// Any bit width (2, 3, 5, 6 and the rest): one warp per output row, lanes
// over elements, up to 8 activation rows. Correct rather than fast.
template <class SB>
DEV void qgemv_gen(GEMV_PARAMS, int bits) {
    rebase(y, x, w, sb, M, 8, ldy, ldx, eidx, topk, eslot, wstride, sbstride);
    const int nw = (K * bits + 31) / 32, ng = K >> gshift;
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= N) return;
    const u32* wr = w + (long long)row * nw;
    float acc[8];
#pragma unroll
    for (int m = 0; m < 8; m++) acc[m] = 0.f;
    for (int e = lane; e < K; e += 32) {
        float s, b;
        SB::get(SB::sel(SB::load(sb, (long long)row * ng + (e >> gshift)), e), s, b);
        float wv = s * qf<SB>(qval(wr, e, bits), bits) + b;
#pragma unroll
        for (int m = 0; m < 8; m++)
            if (m < M) acc[m] = fmaf(wv, x[(long long)m * ldx + e], acc[m]);
    }
#pragma unroll
    for (int m = 0; m < 8; m++) {
        float v = warp_sum(acc[m]);
        if (lane == 0 && m < M) y[(long long)m * ldy + row] = v + (bias ? bias[row] : 0.f);
    }
}
extern "C" __global__ void __launch_bounds__(128) qgemvgen_bf(GEMV_PARAMS, int bits) { grid_dep_start(); qgemv_gen<SBbf>(GEMV_ARGS, bits); }
extern "C" __global__ void __launch_bounds__(128) qgemvgen_f32(GEMV_PARAMS, int bits) { grid_dep_start(); qgemv_gen<SBf32>(GEMV_ARGS, bits); }
extern "C" __global__ void __launch_bounds__(128) qgemvgen_fp(GEMV_PARAMS, int bits) { grid_dep_start(); qgemv_gen<SBfp>(GEMV_ARGS, bits); }
extern "C" __global__ void __launch_bounds__(128) qgemvgen_fp2(GEMV_PARAMS, int bits) { grid_dep_start(); qgemv_gen<SBfp2>(GEMV_ARGS, bits); }

// Dense weights (f32, bf16, f16). The fast form reads 16 bytes per lane;
// dgemvs is the element-wise fallback for rows that are not 16-byte
// aligned. sb is unused (kept so every GEMV shares one parameter list).
template <class T> DEV void dunpack(uint4 v, float* f);
template <> DEV void dunpack<F32>(uint4 v, float* f) {
    f[0] = __uint_as_float(v.x); f[1] = __uint_as_float(v.y); f[2] = __uint_as_float(v.z); f[3] = __uint_as_float(v.w);
}
template <> DEV void dunpack<BF16>(uint4 v, float* f) {
    f[0] = bf16lo(v.x); f[1] = bf16hi(v.x); f[2] = bf16lo(v.y); f[3] = bf16hi(v.y);
    f[4] = bf16lo(v.z); f[5] = bf16hi(v.z); f[6] = bf16lo(v.w); f[7] = bf16hi(v.w);
}
template <> DEV void dunpack<F16>(uint4 v, float* f) {
    u32 a[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; i++) { f[2 * i] = f16f((u16)(a[i] & 0xffff)); f[2 * i + 1] = f16f((u16)(a[i] >> 16)); }
}

template <class T, int MR, int NR, int J>
DEV void dgemv_impl(GEMV_PARAMS) {
    constexpr int VE = 16 / sizeof(typename T::T); // elements per 16-byte vector
    rebase(y, x, w, sb, M, MR, ldy, ldx, eidx, topk, eslot, wstride, sbstride);
    const int nv = K / VE;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int row0 = blockIdx.x * NR;
    const uint4* wr[NR];
#pragma unroll
    for (int r = 0; r < NR; r++) wr[r] = reinterpret_cast<const uint4*>(w) + (long long)min(row0 + r, N - 1) * nv;
    float acc[NR][MR];
#pragma unroll
    for (int r = 0; r < NR; r++)
#pragma unroll
        for (int m = 0; m < MR; m++) acc[r][m] = 0.f;
    for (int c0 = warp * 32 + lane; c0 < nv; c0 += 32 * GW * J) {
        uint4 wv[NR][J];
#pragma unroll
        for (int j = 0; j < J; j++) {
            int vi = c0 + 32 * GW * j;
            int vc = vi < nv ? vi : nv - 1;
#pragma unroll
            for (int r = 0; r < NR; r++) wv[r][j] = wr[r][vc];
        }
#pragma unroll
        for (int j = 0; j < J; j++) {
            int vi = c0 + 32 * GW * j;
            if (vi >= nv) break;
            float xv[MR][VE];
#pragma unroll
            for (int m = 0; m < MR; m++) {
                const float4* xp = reinterpret_cast<const float4*>(x + (long long)min(m, M - 1) * ldx + vi * VE);
#pragma unroll
                for (int i = 0; i < VE / 4; i++) {
                    float4 f = xp[i];
                    xv[m][4 * i] = f.x; xv[m][4 * i + 1] = f.y; xv[m][4 * i + 2] = f.z; xv[m][4 * i + 3] = f.w;
                }
            }
#pragma unroll
            for (int r = 0; r < NR; r++) {
                float f[VE];
                dunpack<T>(wv[r][j], f);
#pragma unroll
                for (int m = 0; m < MR; m++)
#pragma unroll
                    for (int e = 0; e < VE; e++) acc[r][m] = fmaf(xv[m][e], f[e], acc[r][m]);
            }
        }
    }
    finish<NR, MR, GW>(acc, y, bias, row0, N, M, ldy); // 8 warps of 256 threads
}
#define DGEMV(TN, TT, MR, J)                                                                \
    extern "C" __global__ void __launch_bounds__(256) dgemv_##TN##_##MR(GEMV_PARAMS) {       \
        grid_dep_start();                                                                   \
        dgemv_impl<TT, MR, 4, J>(GEMV_ARGS);                                                \
    }
//kernels:part
DGEMV(f32, F32, 1, 2) DGEMV(f32, F32, 2, 2) DGEMV(f32, F32, 4, 1) DGEMV(f32, F32, 8, 1)
DGEMV(bf16, BF16, 1, 2) DGEMV(bf16, BF16, 2, 2) DGEMV(bf16, BF16, 4, 1) DGEMV(bf16, BF16, 8, 1)
DGEMV(f16, F16, 1, 2) DGEMV(f16, F16, 2, 2) DGEMV(f16, F16, 4, 1) DGEMV(f16, F16, 8, 1)

template <class T>
DEV void dgemv_s(GEMV_PARAMS) {
    rebase(y, x, w, sb, M, 8, ldy, ldx, eidx, topk, eslot, wstride, sbstride);
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= N) return;
    const typename T::T* wr = reinterpret_cast<const typename T::T*>(w) + (long long)row * K;
    float acc[8];
#pragma unroll
    for (int m = 0; m < 8; m++) acc[m] = 0.f;
    for (int e = lane; e < K; e += 32) {
        float wv = T::at(wr, e);
#pragma unroll
        for (int m = 0; m < 8; m++)
            if (m < M) acc[m] = fmaf(wv, x[(long long)m * ldx + e], acc[m]);
    }
#pragma unroll
    for (int m = 0; m < 8; m++) {
        float v = warp_sum(acc[m]);
        if (lane == 0 && m < M) y[(long long)m * ldy + row] = v + (bias ? bias[row] : 0.f);
    }
}
extern "C" __global__ void __launch_bounds__(128) dgemvs_f32(GEMV_PARAMS) { grid_dep_start(); dgemv_s<F32>(GEMV_ARGS); }
extern "C" __global__ void __launch_bounds__(128) dgemvs_bf16(GEMV_PARAMS) { grid_dep_start(); dgemv_s<BF16>(GEMV_ARGS); }
extern "C" __global__ void __launch_bounds__(128) dgemvs_f16(GEMV_PARAMS) { grid_dep_start(); dgemv_s<F16>(GEMV_ARGS); }

// Weight conversion for the cuBLAS path (many rows): dequantize a whole
// matrix (or one expert) to f32 so the product runs in TF32 on f32
// activations, which keeps about 3 more bits than a bf16 product would.
template <class SB>
DEV void dequant_f32(float* __restrict__ out, const u32* __restrict__ w, const u32* __restrict__ sb, int N, int K,
                     int bits, int gshift) {
    long long n = (long long)N * K;
    const int nw = (K * bits + 31) / 32, ng = K >> gshift;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        long long r = i / K, e = i - r * K;
        float s, b;
        SB::get(SB::sel(SB::load(sb, r * ng + (e >> gshift)), e), s, b);
        out[i] = s * qf<SB>(qval(w + r * nw, e, bits), bits) + b;
    }
}
extern "C" __global__ void dequant_f32_bf(float* out, const u32* w, const u32* sb, int N, int K, int bits, int gshift) { grid_dep_start();
    dequant_f32<SBbf>(out, w, sb, N, K, bits, gshift);
}
extern "C" __global__ void dequant_f32_f32(float* out, const u32* w, const u32* sb, int N, int K, int bits, int gshift) { grid_dep_start();
    dequant_f32<SBf32>(out, w, sb, N, K, bits, gshift);
}
template <class T>
DEV void widen(float* __restrict__ out, const typename T::T* __restrict__ in, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        out[i] = T::at(in, i);
}
extern "C" __global__ void bf16_to_f32(float* out, const u16* in, long long n) { grid_dep_start(); widen<BF16>(out, in, n); }
extern "C" __global__ void f16_to_f32(float* out, const u16* in, long long n) { grid_dep_start(); widen<F16>(out, in, n); }
// add_bias adds bias[n] to every row of y[m, n] (the cuBLAS path).
extern "C" __global__ void add_bias(float* y, const float* bias, int M, int N) { grid_dep_start();
    long long n = (long long)M * N;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        y[i] += bias[i % N];
}
