// Tensor-core kernels (mma.sync through inline PTX: NVRTC has no mma.h).
//
// qmma4: 4-bit GEMV for 2..32 activation rows (batched decode). The f32
// kernels in gemv.cu do one FMA per weight per activation row, so 8 rows
// cost 8x the math of one and the FP32 pipe, not memory, sets the time
// (notes/cuda-kernels.md: 85 us for 14336x4096 at 8 rows against 16 us at
// one). Here the weights are the A operand of mma.m16n8k16 (16 weight rows
// x 16 k) and the activation rows are B's 8 columns, so up to 8 rows cost
// one mma per 16x16 weights: the same instruction count as one row.
//
// Numbers: a nibble q becomes the f16 1024+q by one LOP3 into 0x6400 (two
// weights per 32-bit register) and one HSUB2 leaves q-8 exactly; products
// q*x are exact in the tensor core and accumulate in f32. x is rounded to
// f16 after a power-of-two scale per 64-wide slab and activation row, so
// its largest element sits in [2^13, 2^14): no overflow whatever the
// activation range, and 11 significant bits (bf16 would keep 8). The
// group's scale and bias are applied in f32 per slab:
// y += s*inv*sum((q-8)*x~) + (b+8s)*sum(x), sum(x) in f32 from unrounded x.
//
// Layout (PTX ISA fragment tables for m16n8k16 .f16): lane = 4g + t.
// A: {R0,R1,R2,R3} = rows g, g+8, g, g+8 at k 2t..2t+1, 2t..2t+1, 2t+8.., 2t+8..
// B: {b0b1, b2b3} = k 2t..2t+1, 2t+8..2t+9 at column g.
// C: c0,c1 = row g, columns 2t, 2t+1; c2,c3 = row g+8.
// The k order inside one mma is free as long as A and B agree: thread t
// owns words 2t and 2t+1 of a 64-weight slab (one 8-byte load per row),
// and word u's nibble pairs (p, p+4), p = 0..3, feed mma 2u + p/2.

DEV u32 f16x2(float lo, float hi) {
    u32 r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
// q2 is the nibbles at bits 0-3 and 16-19 of v as the f16 pair
// (q0-8, q4-8): 1024+q, less 1032, exactly.
DEV u32 q2(u32 v) {
    u32 h = (v & 0x000F000Fu) | 0x64006400u, r;
    asm("sub.f16x2 %0, %1, %2;" : "=r"(r) : "r"(h), "r"(0x64086408u));
    return r;
}
DEV void mma_f16(float (&c)[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

#define QMMA_W 8  // warps per block, splitting K by 64-wide slabs
#define QMMA_RT 2 // 16-row weight tiles per block (x is converted once for all)

// qmma_loadx loads this lane's 16 activations of slab s for column tile
// nt (8 activation rows; zeros past M).
DEV void qmma_loadx(float (&f)[16], const float* x, int M, int ldx, int s, int nt, int g, int t) {
    const int n = nt * 8 + g;
    if (n < M) {
        const float4* xp = reinterpret_cast<const float4*>(x + (long long)n * ldx + (s << 6) + 16 * t);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            float4 v = xp[i];
            f[4 * i] = v.x, f[4 * i + 1] = v.y, f[4 * i + 2] = v.z, f[4 * i + 3] = v.w;
        }
    } else {
#pragma unroll
        for (int i = 0; i < 16; i++) f[i] = 0.f;
    }
}

// qmma_loadx_c is qmma_loadx without a branch (the _xc kernels): every
// lane reads a real row and columns past M are zeroed by a multiply, so
// the shuffles that follow see a converged warp (after a divergent branch
// the compiler emits their slow collective form: WARPSYNC/ENDCOLLECTIVE).
DEV void qmma_loadx_c(float (&f)[16], const float* x, int M, int ldx, int s, int nt, int g, int t) {
    const int n = nt * 8 + g;
    const float keep = n < M ? 1.f : 0.f;
    const float4* xp = reinterpret_cast<const float4*>(x + (long long)min(n, M - 1) * ldx + (s << 6) + 16 * t);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float4 v = xp[i];
        f[4 * i] = keep * v.x, f[4 * i + 1] = keep * v.y, f[4 * i + 2] = keep * v.z, f[4 * i + 3] = keep * v.w;
    }
}

// qmma_packx turns this lane's 16 activations into f16 B fragments (xb)
// after a power-of-two scale shared by its 4-lane row (g), and leaves that
// row's 1/scale (inv) and sum(x) (sx) in each of its lanes.
DEV void qmma_packx(const float (&f)[16], u32 (&xb)[8], float& inv, float& sx) {
    float m = 0.f;
    sx = 0.f;
#pragma unroll
    for (int i = 0; i < 16; i++) m = fmaxf(m, fabsf(f[i])), sx += f[i];
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
    sx += __shfl_xor_sync(0xffffffffu, sx, 1);
    sx += __shfl_xor_sync(0xffffffffu, sx, 2);
    // Scale 2^(13-E) for max in [2^E, 2^(E+1)): exponent field F.
    int e = (int)((__float_as_uint(m) >> 23) & 0xffu);
    int F = min(max(267 - e, 1), 253);
    float sc2 = __uint_as_float((u32)F << 23);
    inv = __uint_as_float((u32)(254 - F) << 23);
#pragma unroll
    for (int u = 0; u < 2; u++)
#pragma unroll
        for (int p = 0; p < 4; p++) xb[4 * u + p] = f16x2(f[8 * u + p] * sc2, f[8 * u + p + 4] * sc2);
}

// qmma_convx turns one column tile's activations into f16 B fragments
// (xb), with each output column's 1/scale (cs) and sum(x) (cx).
DEV void qmma_convx(const float (&f)[16], u32 (&xb)[8], float (&cs)[2], float (&cx)[2], int t) {
    float inv, sx;
    qmma_packx(f, xb, inv, sx);
    // Column 2t's values live in lanes 4*(2t)..; column 2t+1's in 4*(2t+1)...
    cs[0] = __shfl_sync(0xffffffffu, inv, 8 * t);
    cs[1] = __shfl_sync(0xffffffffu, inv, 8 * t + 4);
    cx[0] = __shfl_sync(0xffffffffu, sx, 8 * t);
    cx[1] = __shfl_sync(0xffffffffu, sx, 8 * t + 4);
}

// SBmx: MLX's 4-bit floating-point modes on the tensor cores: E2M1 codes
// in the affine 4-bit words, scale words as SBfp (mxfp4: a word a group of
// 32) or SBfp2 (PAIR, nvfp4: a word a pair of groups of 16). A 64-wide
// slab then holds two scale words, which qmma4_impl loads as one raw
// value (a uint2; the kernels get gshift 6, so a "group" is the slab).
// Thread t's 16 weights of a slab (k 16t..16t+15) lie in one group of 32
// and in group t of 16 (nvfp4), but the mma sums all four threads'
// products, so the scales cannot be applied after it as the affine
// group's are: qmma_math_fp folds each thread's scale into its A operand.
template <bool PAIR> struct SBmx {
    typedef uint2 raw;
    static constexpr bool fp = true, pair = PAIR;
    static DEV raw load(const u32* p, long long g) { return reinterpret_cast<const uint2*>(p)[g]; }
};
template <class SB> struct MmaFP { static constexpr bool v = false; };
template <bool P> struct MmaFP<SBmx<P>> { static constexpr bool v = true; };

DEV u32 hmul2(u32 a, u32 b) {
    u32 r;
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
}
// mx_fold splits one row's slab scales into P, the largest power of two
// not above the slab's largest scale |S|, and thread t's factor h (f16x2)
// = 2^14 * S_t / P: fp4x2_h16's codes (value * 2^-14) times h are value *
// S_t / P, below 12 and exact in f16 (mxfp4: S_t / P a power of two;
// nvfp4: 2 by 4 significant bits) unless S_t / P is under 2^-13, whose
// products fall on f16's subnormals and round at 2^-24, against slab
// terms up to 12. The row's result is P * 2^-14 * (1/x's scale) * mma.
// SBfp words have a zero high half, so one max of four halves serves both.
template <bool PAIR>
DEV void mx_fold(uint2 sc, int t, float& P, u32& h) {
    const float m = fmaxf(fmaxf(fabsf(bf16lo(sc.x)), fabsf(bf16hi(sc.x))), fmaxf(fabsf(bf16lo(sc.y)), fabsf(bf16hi(sc.y))));
    const u32 pb = __float_as_uint(m) & 0x7f800000u;
    u32 own = (t >> 1) ? sc.y : sc.x;
    if (PAIR && (t & 1)) own >>= 16;
    // 2^(14-e) for P = 2^e: exponent field 141-e, (268 << 23) - bits(P).
    const float hf = bf16lo(own) * __uint_as_float(0x86000000u - pb);
    P = __uint_as_float(pb) * (1.f / 16384.f);
    h = f16x2(hf, hf);
}

// qmma_math_fp is qmma_math for SBmx: the same four mma per 16-row weight
// tile and column tile on fp4x2_h16's codes times mx_fold's factors, no
// bias term.
template <class SB, int NT, int RT>
DEV void qmma_math_fp(float (&acc)[RT][NT][4], const uint2 (&wc)[RT][2], const uint2 (&sc)[RT][2], const u32 (&xb)[NT][8],
                      const float (&cs)[NT][2], int t) {
#pragma unroll
    for (int rt = 0; rt < RT; rt++) {
        float p0, p1;
        u32 h0, h1;
        mx_fold<SB::pair>(sc[rt][0], t, p0, h0);
        mx_fold<SB::pair>(sc[rt][1], t, p1, h1);
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            float c[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const u32 lo = (j >> 1) ? wc[rt][0].y : wc[rt][0].x;
                const u32 hi = (j >> 1) ? wc[rt][1].y : wc[rt][1].x;
                const int k = (j & 1) * 2; // qmma_math's nibble pairs: k, then k+1
                mma_f16(c, hmul2(fp4x2_h16(lo, k), h0), hmul2(fp4x2_h16(hi, k), h1), hmul2(fp4x2_h16(lo, k + 1), h0),
                        hmul2(fp4x2_h16(hi, k + 1), h1),
                        xb[nt][(j >> 1) * 4 + (j & 1) * 2], xb[nt][(j >> 1) * 4 + (j & 1) * 2 + 1]);
            }
            acc[rt][nt][0] = fmaf(p0 * cs[nt][0], c[0], acc[rt][nt][0]);
            acc[rt][nt][1] = fmaf(p0 * cs[nt][1], c[1], acc[rt][nt][1]);
            acc[rt][nt][2] = fmaf(p1 * cs[nt][0], c[2], acc[rt][nt][2]);
            acc[rt][nt][3] = fmaf(p1 * cs[nt][1], c[3], acc[rt][nt][3]);
        }
    }
}

// qmma_math runs four mma per 16-row weight tile and column tile and
// applies the group's scale and bias.
template <class SB, int NT, int RT>
DEV void qmma_math(float (&acc)[RT][NT][4], const uint2 (&wc)[RT][2], const typename SB::raw (&sc)[RT][2],
                   const u32 (&xb)[NT][8], const float (&cs)[NT][2], const float (&cx)[NT][2]) {
#pragma unroll
    for (int rt = 0; rt < RT; rt++) {
        float s0, b0, s1, b1;
        SB::get(sc[rt][0], s0, b0);
        SB::get(sc[rt][1], s1, b1);
        b0 = fmaf(8.f, s0, b0), b1 = fmaf(8.f, s1, b1);
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            float c[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const u32 lo = (j >> 1) ? wc[rt][0].y : wc[rt][0].x;
                const u32 hi = (j >> 1) ? wc[rt][1].y : wc[rt][1].x;
                const int sh = (j & 1) * 8;
                mma_f16(c, q2(lo >> sh), q2(hi >> sh), q2(lo >> (sh + 4)), q2(hi >> (sh + 4)),
                        xb[nt][(j >> 1) * 4 + (j & 1) * 2], xb[nt][(j >> 1) * 4 + (j & 1) * 2 + 1]);
            }
            acc[rt][nt][0] = fmaf(s0 * cs[nt][0], c[0], fmaf(b0, cx[nt][0], acc[rt][nt][0]));
            acc[rt][nt][1] = fmaf(s0 * cs[nt][1], c[1], fmaf(b0, cx[nt][1], acc[rt][nt][1]));
            acc[rt][nt][2] = fmaf(s1 * cs[nt][0], c[2], fmaf(b1, cx[nt][0], acc[rt][nt][2]));
            acc[rt][nt][3] = fmaf(s1 * cs[nt][1], c[3], fmaf(b1, cx[nt][1], acc[rt][nt][3]));
        }
    }
}
// qmma_mma is the slab's math for scale type SB: qmma_math, or
// qmma_math_fp for SBmx (thread t picks its scale).
template <class SB, int NT, int RT>
DEV void qmma_mma(float (&acc)[RT][NT][4], const uint2 (&wc)[RT][2], const typename SB::raw (&sc)[RT][2],
                  const u32 (&xb)[NT][8], const float (&cs)[NT][2], const float (&cx)[NT][2], int t) {
    if constexpr (MmaFP<SB>::v) qmma_math_fp<SB, NT, RT>(acc, wc, sc, xb, cs, t);
    else qmma_math<SB, NT, RT>(acc, wc, sc, xb, cs, cx);
}

// qmma_slab adds one 64-wide slab of K to the block's accumulators: each
// column tile's x is loaded and converted in turn (fewest live registers),
// then the mma. q2 yields q-8 (centred: the bias term then carries b+8s,
// near the group's midpoint, so the f16-rounded product term is small
// against the result and its rounding matters less).
template <class SB, int NT, int RT>
DEV void qmma_slab(float (&acc)[RT][NT][4], const uint2 (&wc)[RT][2], const typename SB::raw (&sc)[RT][2],
                   const float* x, int M, int ldx, int s, int g, int t) {
    u32 xb[NT][8];
    float cs[NT][2], cx[NT][2];
#pragma unroll
    for (int nt = 0; nt < NT; nt++) {
        float f[16];
        qmma_loadx(f, x, M, ldx, s, nt, g, t);
        qmma_convx(f, xb[nt], cs[nt], cx[nt], t);
    }
    qmma_mma<SB, NT, RT>(acc, wc, sc, xb, cs, cx, t);
}

// qmma_slab_x is qmma_slab on activations loaded earlier (the _xp kernels).
// keep 0 makes the slab count zero (the _xc kernels' slabs past K).
template <class SB, int NT, int RT>
DEV void qmma_slab_x(float (&acc)[RT][NT][4], const uint2 (&wc)[RT][2], const typename SB::raw (&sc)[RT][2],
                     const float (&f)[NT][16], int t, float keep = 1.f) {
    u32 xb[NT][8];
    float cs[NT][2], cx[NT][2];
#pragma unroll
    for (int nt = 0; nt < NT; nt++) {
        qmma_convx(f[nt], xb[nt], cs[nt], cx[nt], t);
        cs[nt][0] *= keep, cs[nt][1] *= keep, cx[nt][0] *= keep, cx[nt][1] *= keep;
    }
    qmma_mma<SB, NT, RT>(acc, wc, sc, xb, cs, cx, t);
}

// qmma4_impl: y[M, N] = x[M, K] @ W^T for W 4-bit, group >= 64, K % 64 == 0,
// M <= 8*NT. Grid: ceil(N/(16*RT)) blocks of QMMA_W warps. Each warp loads
// the weights of D slabs (its slabs s, s+W, ...) before the math of any of
// them: D*RT/2 KB in flight per warp. (v1, two slabs in a rolling buffer,
// ran at 0.35 of the copy rate for 2 rows: latency-bound.) Every block
// reads all of x (f32, from L2): at 16 rows that is 256 KB per 32 weight
// rows, 115 MB of L2 reads against 33 MB of weights for 14336x4096, so
// the _r4 kernels (RT = 4: 64 rows per block) halve it.
// KS: the blocks of a thread block cluster along grid z split K (slab
// ranges), and their partials meet through distributed shared memory.
template <class SB, int NT, int D, int RT = QMMA_RT, bool XP = false, bool CV = false, bool KS = false>
DEV void qmma4_impl(float* y, const float* x, const u32* w, const u32* sb, const float* bias, int N, int K, int M,
                    int gshift, int ldy, int ldx) {
    constexpr int SBW = sizeof(typename SB::raw) / 4;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int nw = K >> 3, ng = K >> gshift, ns = K >> 6;
    const int row0 = blockIdx.x * (16 * RT);
    const uint2* wp[RT][2];
    const u32* sp[RT][2];
#pragma unroll
    for (int rt = 0; rt < RT; rt++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            int row = min(row0 + rt * 16 + g + 8 * h, N - 1);
            wp[rt][h] = reinterpret_cast<const uint2*>(w + (long long)row * nw) + t; // slab s: [4s]
            sp[rt][h] = sb + (long long)row * ng * SBW;
        }
    float acc[RT][NT][4];
#pragma unroll
    for (int rt = 0; rt < RT; rt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++) acc[rt][nt][i] = 0.f;

    const int nsplit = KS ? gridDim.z : 1, per = (ns + nsplit - 1) / nsplit;
    const int s_beg = KS ? blockIdx.z * per : 0, s_end = KS ? min(ns, s_beg + per) : ns;
    for (int s0 = s_beg + warp; s0 < s_end; s0 += D * QMMA_W) {
        uint2 wc[D][RT][2];
        typename SB::raw sc[D][RT][2];
#pragma unroll
        for (int d = 0; d < D; d++) {
            const int s = CV ? min(s0 + d * QMMA_W, s_end - 1) : s0 + d * QMMA_W;
            if (CV || s < s_end) {
#pragma unroll
                for (int rt = 0; rt < RT; rt++)
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        wc[d][rt][h] = wp[rt][h][4 * s];
                        sc[d][rt][h] = SB::load(sp[rt][h], (s << 6) >> gshift);
                    }
            }
        }
        if constexpr (CV) {
            // As XP, without branches (slabs past K repeat the last one and
            // count zero): see qmma_loadx_c.
            float f[D][NT][16];
#pragma unroll
            for (int d = 0; d < D; d++)
#pragma unroll
                for (int nt = 0; nt < NT; nt++) qmma_loadx_c(f[d][nt], x, M, ldx, min(s0 + d * QMMA_W, s_end - 1), nt, g, t);
#pragma unroll
            for (int d = 0; d < D; d++)
                qmma_slab_x<SB, NT, RT>(acc, wc[d], sc[d], f[d], t, s0 + d * QMMA_W < s_end ? 1.f : 0.f);
        } else if constexpr (XP) {
            // x of the D slabs loaded with their weights, before any math:
            // one L2 round trip per D slabs instead of one per slab.
            float f[D][NT][16];
#pragma unroll
            for (int d = 0; d < D; d++) {
                const int s = s0 + d * QMMA_W;
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
                    if (s < s_end) qmma_loadx(f[d][nt], x, M, ldx, s, nt, g, t);
            }
#pragma unroll
            for (int d = 0; d < D; d++) {
                const int s = s0 + d * QMMA_W;
                if (s < s_end) qmma_slab_x<SB, NT, RT>(acc, wc[d], sc[d], f[d], t);
            }
        } else {
#pragma unroll
            for (int d = 0; d < D; d++) {
                const int s = s0 + d * QMMA_W; // warp-uniform: the shuffles inside see every lane
                if (s < s_end) qmma_slab<SB, NT, RT>(acc, wc[d], sc[d], x, M, ldx, s, g, t);
            }
        }
    }
    // Sum the warps' partials: red[warp][fragment element][lane].
    constexpr int NE = RT * NT * 4;
    __shared__ float red[QMMA_W][NE][32];
#pragma unroll
    for (int rt = 0; rt < RT; rt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++) red[warp][(rt * NT + nt) * 4 + i][lane] = acc[rt][nt][i];
    __syncthreads();
    // store writes fragment element e of lane ln (sum v) to y.
    auto store = [&](int e, int ln, float v) {
        const int i = e & 3, nt = (e >> 2) % NT, rt = (e >> 2) / NT;
        const int row = row0 + rt * 16 + (ln >> 2) + (i >> 1) * 8, col = nt * 8 + 2 * (ln & 3) + (i & 1);
        if (row < N && col < M) y[(long long)col * ldy + row] = v + (bias ? bias[row] : 0.f);
    };
    for (int idx = threadIdx.x; idx < NE * 32; idx += blockDim.x) {
        const int e = idx >> 5, ln = idx & 31;
        float v = 0.f;
#pragma unroll
        for (int k = 0; k < QMMA_W; k++) v += red[k][e][ln];
        if (KS && nsplit > 1) red[0][e][ln] = v; // (this thread's own element: read above)
        else store(e, ln, v);
    }
    if constexpr (KS) {
        if (nsplit > 1) {
            cluster_sync(); // every split's block partial is in its shared memory
            const int chunk = (NE * 32 + nsplit - 1) / nsplit, e0 = blockIdx.z * chunk, e1 = min(e0 + chunk, NE * 32);
            for (int idx = e0 + threadIdx.x; idx < e1; idx += blockDim.x) {
                const int e = idx >> 5, ln = idx & 31;
                float v = 0.f;
                for (int k = 0; k < nsplit; k++) v += ld_cluster(&red[0][e][ln], k);
                store(e, ln, v);
            }
            cluster_sync(); // no block leaves (and frees its partial) while another reads it
        }
    }
}
#define QMMA(NAME, SBT, NT, D) QMMA_C(NAME, SBT, NT, D, false, false)
#define QMMA_C(NAME, SBT, NT, D, XP, CV)                                                                            \
    extern "C" __global__ void __launch_bounds__(32 * QMMA_W, 1) NAME(GEMV_PARAMS) {                              \
        grid_dep_start();                                                                                          \
        qmma4_impl<SBT, NT, D, QMMA_RT, XP, CV>(y, x, w, sb, bias, N, K, M, gshift, ldy, ldx);                     \
    }
// 4 slabs in flight (2 with 32 rows, for registers). bf16 scales up to 16
// rows take the _xc kernels: x loaded with the weights for all D slabs
// before any math, without branches around the shuffles (5-15% faster
// than loading each slab's x after its weights on 8 of 9 shapes;
// docs/cuda.md). bf16 scales split K over a cluster (below); f32 scales
// keep the unsplit forms.
QMMA(qmma4_bf_1, SBbf, 1, 4) QMMA(qmma4_bf_2, SBbf, 2, 4)
QMMA(qmma4_f32_1, SBf32, 1, 4) QMMA(qmma4_f32_2, SBf32, 2, 4) QMMA(qmma4_f32_4, SBf32, 4, 2)
// The _xc kernels split K over a thread block cluster along grid z (KS)
// so the grid holds about two blocks an SM (plan.PlanGEMV), at <= 128
// registers (two blocks an SM) with 2 slabs in flight a warp (1 at 16
// rows): s18d, 1.1-1.4x the unsplit one-block-an-SM form (D 4 and 2) on
// the Llama shapes at 2-16 rows, a batch-8 decode step 4.85 ms against
// 5.91 (notes/cuda-session-18.md).
#define QMMA_KS(NAME, SBT, NT, D, XP, CV)                                                                           \
    extern "C" __global__ void __launch_bounds__(32 * QMMA_W, 2) NAME(GEMV_PARAMS) {                              \
        grid_dep_start();                                                                                          \
        qmma4_impl<SBT, NT, D, QMMA_RT, XP, CV, true>(y, x, w, sb, bias, N, K, M, gshift, ldy, ldx);               \
    }
// 17-32 rows (qmma4_bf_4) too, one slab in flight a warp: 1.06-1.14x the
// unsplit form (s18e), though 120 bytes spill at 128 registers.
QMMA_KS(qmma4_bf_1_xc, SBbf, 1, 2, true, true) QMMA_KS(qmma4_bf_2_xc, SBbf, 2, 1, true, true)
QMMA_KS(qmma4_bf_4, SBbf, 4, 1, false, false)

// Operand conversion for the cuBLAS bf16 path (prefill): weights are
// dequantized (or narrowed) to bf16 and activations rounded to bf16, then
// cublasGemmEx multiplies on the tensor cores with f32 accumulation and an
// f32 result (TF32 on f32 operands runs at half the rate and moves twice
// the bytes).
// (bf16rn, the round-to-nearest-even conversion, is in common.cu.)
extern "C" __global__ void f32_to_bf16(u16* out, const float* in, long long n) { grid_dep_start();
    GRID_STRIDE(i, n) out[i] = bf16rn(in[i]);
}
// dequant_bf16: 4 and 8 bits, 8 elements (one 4-bit word or two 8-bit
// words) per thread step; other widths element by element.
template <class SB>
DEV void dequant_bf16(u16* __restrict__ out, const u32* __restrict__ w, const u32* __restrict__ sb, int N, int K, int bits,
                      int gshift) {
    const int nw = (K * bits + 31) / 32, ng = K >> gshift;
    if ((bits == 4 || bits == 8) && (K & 7) == 0) {
        long long n8 = (long long)N * K / 8;
        GRID_STRIDE(i, n8) {
            long long e0 = i * 8, r = e0 / K, c = e0 - r * K;
            float s, b;
            SB::get(SB::sel(SB::load(sb, r * ng + (c >> gshift)), c), s, b);
            u32 q[8];
            const u32* row = w + r * nw;
            if (bits == 4) {
                u32 v = row[c >> 3];
#pragma unroll
                for (int k = 0; k < 8; k++) q[k] = (v >> (4 * k)) & 15u;
            } else {
                u32 v0 = row[c >> 2], v1 = row[(c >> 2) + 1];
#pragma unroll
                for (int k = 0; k < 4; k++) q[k] = (v0 >> (8 * k)) & 255u, q[4 + k] = (v1 >> (8 * k)) & 255u;
            }
            uint4 o;
#define DQ(k) bf16rn(s * qf<SB>(q[k], bits) + b)
            o.x = DQ(0) | ((u32)DQ(1) << 16);
            o.y = DQ(2) | ((u32)DQ(3) << 16);
            o.z = DQ(4) | ((u32)DQ(5) << 16);
            o.w = DQ(6) | ((u32)DQ(7) << 16);
#undef DQ
            reinterpret_cast<uint4*>(out)[i] = o;
        }
        return;
    }
    long long n = (long long)N * K;
    GRID_STRIDE(i, n) {
        long long r = i / K, e = i - r * K;
        float s, b;
        SB::get(SB::sel(SB::load(sb, r * ng + (e >> gshift)), e), s, b);
        out[i] = bf16rn(s * qf<SB>(qval(w + r * nw, e, bits), bits) + b);
    }
}
extern "C" __global__ void dequant_bf16_bf(u16* out, const u32* w, const u32* sb, int N, int K, int bits, int gshift) { grid_dep_start();
    dequant_bf16<SBbf>(out, w, sb, N, K, bits, gshift);
}
extern "C" __global__ void dequant_bf16_f32(u16* out, const u32* w, const u32* sb, int N, int K, int bits, int gshift) { grid_dep_start();
    dequant_bf16<SBf32>(out, w, sb, N, K, bits, gshift);
}
extern "C" __global__ void dequant_bf16_fp(u16* out, const u32* w, const u32* sb, int N, int K, int bits, int gshift) { grid_dep_start();
    dequant_bf16<SBfp>(out, w, sb, N, K, bits, gshift);
}
extern "C" __global__ void dequant_bf16_fp2(u16* out, const u32* w, const u32* sb, int N, int K, int bits, int gshift) { grid_dep_start();
    dequant_bf16<SBfp2>(out, w, sb, N, K, bits, gshift);
}
