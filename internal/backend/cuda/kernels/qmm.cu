// qmm: 4-bit quantized matmul for many activation rows (batched decode):
// y[M, N] = x[M, K] @ W^T (+ bias), W in MLX's affine layout with bf16
// scale/bias pairs, groups of 16 to 128, K % 64 == 0, x as bf16 [M, K]
// (the copy the norm or activation before the product writes, or a
// conversion). Every packed weight is read once per 8*NB activation rows
// and dequantized in registers into the A operand of mma.m16n8k16.bf16:
// no bf16 copy of the matrix is written (the path it replaces expanded
// all weights to a scratch matrix every step and then ran cuBLAS on it).
//
// Numbers: a nibble q becomes the bf16 128+q by one LOP3 into 0x4300, one
// bf16x2 FMA leaves q exactly and a second gives q*s+b rounded once to
// bf16: the weight the bf16 cuBLAS path multiplies. Products accumulate in
// f32 in the tensor cores.
//
// Work split: a block is 8 warps, each owning 16 weight rows (one m16 A
// tile) for all 8*NB activation rows of the block's tile, which the warps
// share through shared memory. Blocks split K over a thread block cluster
// (grid z, S blocks): each sums its slabs into registers, the partial
// tiles meet in shared memory, and after a cluster barrier every block
// adds up a slice of the tile from all S and writes it. Grid x is the
// activation-row tile, so the blocks that read the same weights run side
// by side and share them in L2.
//
// k order: as in qmma4 (mma.cu), thread t of a 4-lane group owns words 2t
// and 2t+1 of each 64-weight slab, and word u's nibble pairs (p, p+4) feed
// mma 2u + p/2. The x tile in shared memory is stored in the same order
// (each 8-element chunk as (x0,x4), (x1,x5), (x2,x6), (x3,x7)), permuted
// while it is copied in, so a lane's B fragments are two 16-byte loads.

#define QMM_WARPS 8
#define QMM_BN (16 * QMM_WARPS) // weight rows a block
#define QMM_XS 72               // x tile row stride in bf16: 64 + 8 keeps the 16-byte loads conflict-free
#define QMM_RS (QMM_BN + 4)     // partial tile row stride in floats (conflict-free stores)

DEV u32 bf2_fma(u32 a, u32 b, u32 c) {
    u32 d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}
// qmm_dq is the nibbles at bits 0-3 and 16-19 of v as the bf16 pair
// (q0*s+b, q4*s+b); s2 and b2 hold s and b in both halves.
DEV u32 qmm_dq(u32 v, u32 s2, u32 b2) {
    const u32 h = (v & 0x000F000Fu) | 0x43004300u;          // 128+q
    const u32 q = bf2_fma(h, 0x3F803F80u, 0xC300C300u);      // *1 - 128: q exactly
    return bf2_fma(q, s2, b2);
}
DEV void mma_bf16(float (&c)[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
// qmm_perm puts an 8-element bf16 chunk into the k order of the B
// fragments: (x0,x4), (x1,x5), (x2,x6), (x3,x7).
DEV uint4 qmm_perm(uint4 v) {
    uint4 r;
    r.x = __byte_perm(v.x, v.z, 0x5410);
    r.y = __byte_perm(v.x, v.z, 0x7632);
    r.z = __byte_perm(v.y, v.w, 0x5410);
    r.w = __byte_perm(v.y, v.w, 0x7632);
    return r;
}

// qmm_xload loads this thread's chunks of slab s of the x tile (rows past
// M as zeros): XC chunks of 8 elements, chunk c = threadIdx.x + NT*i is
// row c/8, chunk c%8 of the slab.
template <int XC, int NT>
DEV void qmm_xload(uint4 (&xr)[XC], const u16* x, int M, int K, int m0, int s, int nchunks) {
#pragma unroll
    for (int i = 0; i < XC; i++) {
        const int c = threadIdx.x + NT * i, r = c >> 3;
        xr[i].x = xr[i].y = xr[i].z = xr[i].w = 0u;
        if (c < nchunks && m0 + r < M)
            xr[i] = *reinterpret_cast<const uint4*>(x + (long long)(m0 + r) * K + (s << 6) + ((c & 7) << 3));
    }
}
template <int XC, int NT>
DEV void qmm_xstore(u16* xs, const uint4 (&xr)[XC], int nchunks) {
#pragma unroll
    for (int i = 0; i < XC; i++) {
        const int c = threadIdx.x + NT * i;
        if (c < nchunks) *reinterpret_cast<uint4*>(xs + (c >> 3) * QMM_XS + ((c & 7) << 3)) = qmm_perm(xr[i]);
    }
}

// qmm_store_tile writes a block's tile of y (BM = 8*NB activation rows x
// QMM_BN weight rows) from each warp's accumulators: acc[(mt*NB + nt)*4
// + i] is the m16 tile mt0 + mt (mt0: the warp's first, 16 weight rows
// each) by the n8 tile nt in mma.m16n8k16's C layout (c0,c1: row g,
// columns 2t, 2t+1; c2,c3: row g+8). The tiles meet in shared memory
// (red, free when called); with a split-K cluster (grid z) every block
// then adds up a slice of the tile from all splits and writes it.
template <int NB, int MT>
DEV void qmm_store_tile(const float* acc, float* red, float* y, const float* bias, int N, int M, int m0, int nblk, int mt0,
                        int g, int t, int NT) {
    constexpr int BM = 8 * NB;
    const int S = gridDim.z, rank = blockIdx.z;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NB; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                red[(nt * 8 + 2 * t + (i & 1)) * QMM_RS + (mt0 + mt) * 16 + g + 8 * (i >> 1)] = acc[(mt * NB + nt) * 4 + i];
    if (S > 1)
        cluster_sync(); // every split's partial tile is in its shared memory
    else
        __syncthreads();
    const int chunk = (BM * QMM_BN + S - 1) / S, e0 = rank * chunk, e1 = min(e0 + chunk, BM * QMM_BN);
    for (int e = e0 + (int)threadIdx.x; e < e1; e += NT) {
        const int col = e / QMM_BN, r = e - col * QMM_BN, row = nblk + r, m = m0 + col;
        float v = 0.f;
        if (S > 1) {
            for (int k = 0; k < S; k++) v += ld_cluster(&red[col * QMM_RS + r], k);
        } else {
            v = red[col * QMM_RS + r];
        }
        if (row < N && m < M) y[(long long)m * N + row] = v + (bias ? bias[row] : 0.f);
    }
    if (S > 1) cluster_sync(); // no block leaves (and frees its partials) while another reads them
}

// QMM_SEGS: a launch takes up to three matrices on the same x (a layer's
// q, k and v, or gate and up), each its own output: segment i is grid y
// blocks [nb_i, nb_{i+1}).
#define QMM_SEG_PARAMS(i) float *y##i, const u32 *w##i, const u32 *sb##i, const float *bias##i, int N##i
#define QMM_PARAMS                                                                                          \
    const u16 *x, int K, int M, int gshift, QMM_SEG_PARAMS(0), QMM_SEG_PARAMS(1), QMM_SEG_PARAMS(2), int nb1, \
        int nb2
// QMM_SEGMENT picks this block's matrix (segment) from QMM_PARAMS: its
// output, weights, scales, bias and rows, and by, its block row in it.
#define QMM_SEGMENT(y, w, sb, bias, N, by)                                                                 \
    do {                                                                                                   \
        by = blockIdx.y, y = y0, w = w0, sb = sb0, bias = bias0, N = N0;                                   \
        if (by >= nb2)                                                                                     \
            y = y2, w = w2, sb = sb2, bias = bias2, N = N2, by -= nb2;                                     \
        else if (by >= nb1)                                                                                \
            y = y1, w = w1, sb = sb1, bias = bias1, N = N1, by -= nb1;                                     \
    } while (0)
#define QMM_ARGS x, K, M, gshift, y0, w0, sb0, bias0, N0, y1, w1, sb1, bias1, N1, y2, w2, sb2, bias2, N2, nb1, nb2

// W warps of MT m16 tiles each: a block covers 16*MT*W = QMM_BN weight
// rows (MT = 2 lets each B fragment from shared memory feed two mma).
template <int NB, int D, int MT = 1, int W = QMM_WARPS>
DEV void qmm4_impl(QMM_PARAMS) {
    static_assert(16 * MT * W == QMM_BN, "a block covers QMM_BN weight rows");
    constexpr int NT = 32 * W, BM = 8 * NB, XC = (BM * 8 + NT - 1) / NT;
    constexpr int XBYTES = 3 * BM * QMM_XS * 2, RBYTES = BM * QMM_RS * 4;
    __shared__ __align__(16) unsigned char smem[XBYTES > RBYTES ? XBYTES : RBYTES];
    u16* xs = reinterpret_cast<u16*>(smem);      // [3][BM][QMM_XS], the x of three slabs
    float* red = reinterpret_cast<float*>(smem); // [BM][QMM_RS], the partial tile (after the loop)

    // This block's matrix.
    float* y;
    const u32 *w, *sb;
    const float* bias;
    int N, by;
    QMM_SEGMENT(y, w, sb, bias, N, by);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int nw = K >> 3, ng = K >> gshift, ns = K >> 6;
    const int m0 = blockIdx.x * BM, nblk = by * QMM_BN, row0 = nblk + warp * 16 * MT;
    const int S = gridDim.z, rank = blockIdx.z;
    const int s_begin = (int)((long long)ns * rank / S), s_end = (int)((long long)ns * (rank + 1) / S);
    const int nchunks = BM * 8;

    const uint2* wp[MT][2];
    const u32* sp[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int row = min(row0 + 16 * mt + g + 8 * h, N - 1);
            wp[mt][h] = reinterpret_cast<const uint2*>(w + (long long)row * nw) + t; // slab s: [4s]
            sp[mt][h] = sb + (long long)row * ng;
        }
    // The weights are constant: their first slabs load before waiting for
    // the kernel that writes x.
    uint2 wc[D][MT][2];
    u32 sc[D][MT][2];
    grid_dep_launch();
#pragma unroll
    for (int d = 0; d < D; d++) {
        const int s = min(s_begin + d, s_end - 1);
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int h = 0; h < 2; h++)
                wc[d][mt][h] = wp[mt][h][4 * s], sc[d][mt][h] = sp[mt][h][((s << 6) + 16 * t) >> gshift];
    }
    grid_dep_wait();

    float acc[MT][NB][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NB; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++) acc[mt][nt][i] = 0.f;

    // x runs two slabs ahead of the math: slab s+1 waits in shared memory
    // and slab s+2 in registers while slab s is multiplied (one slab ahead
    // left the L2 latency of every slab's x in front of its barrier).
    uint4 xr[XC];
    qmm_xload<XC, NT>(xr, x, M, K, m0, s_begin, nchunks);
    qmm_xstore<XC, NT>(xs + (s_begin % 3) * BM * QMM_XS, xr, nchunks);
    if (s_begin + 1 < s_end) qmm_xload<XC, NT>(xr, x, M, K, m0, s_begin + 1, nchunks);
    for (int s0 = s_begin; s0 < s_end; s0 += D) {
#pragma unroll
        for (int d = 0; d < D; d++) {
            const int s = s0 + d;
            if (s < s_end) { // block-uniform
                if (s + 1 < s_end) qmm_xstore<XC, NT>(xs + ((s + 1) % 3) * BM * QMM_XS, xr, nchunks);
                if (s + 2 < s_end) qmm_xload<XC, NT>(xr, x, M, K, m0, s + 2, nchunks);
                __syncthreads(); // slab s+1's x is in; every warp is past slab s-2, whose buffer that was
                const u16* xb = xs + (s % 3) * BM * QMM_XS;
                u32 a[MT][4][4];
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    u32 s2[2], b2[2];
#pragma unroll
                    for (int h = 0; h < 2; h++)
                        s2[h] = __byte_perm(sc[d][mt][h], 0u, 0x1010), b2[h] = __byte_perm(sc[d][mt][h], 0u, 0x3232);
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        const uint2 w0 = wc[d][mt][0], w1 = wc[d][mt][1];
                        const u32 lo = (j >> 1) ? w0.y : w0.x, hi = (j >> 1) ? w1.y : w1.x;
                        const int sh = (j & 1) * 8;
                        a[mt][j][0] = qmm_dq(lo >> sh, s2[0], b2[0]);
                        a[mt][j][1] = qmm_dq(hi >> sh, s2[1], b2[1]);
                        a[mt][j][2] = qmm_dq(lo >> (sh + 4), s2[0], b2[0]);
                        a[mt][j][3] = qmm_dq(hi >> (sh + 4), s2[1], b2[1]);
                    }
                }
                // Refill this slot: slab s + D, in flight under the math.
                if (s + D < s_end) {
#pragma unroll
                    for (int mt = 0; mt < MT; mt++)
#pragma unroll
                        for (int h = 0; h < 2; h++)
                            wc[d][mt][h] = wp[mt][h][4 * (s + D)],
                            sc[d][mt][h] = sp[mt][h][(((s + D) << 6) + 16 * t) >> gshift];
                }
#pragma unroll
                for (int nt = 0; nt < NB; nt++) {
                    const uint4* xp = reinterpret_cast<const uint4*>(xb + (nt * 8 + g) * QMM_XS) + 2 * t;
                    const uint4 x0 = xp[0], x1 = xp[1];
                    const u32 xv[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
                    for (int mt = 0; mt < MT; mt++)
#pragma unroll
                        for (int j = 0; j < 4; j++)
                            mma_bf16(acc[mt][nt], a[mt][j][0], a[mt][j][1], a[mt][j][2], a[mt][j][3],
                                     xv[(j >> 1) * 4 + (j & 1) * 2], xv[(j >> 1) * 4 + (j & 1) * 2 + 1]);
                }
            }
        }
    }
    __syncthreads(); // the x buffers become the partial tile
    qmm_store_tile<NB, MT>(&acc[0][0][0], red, y, bias, N, M, m0, nblk, warp * MT, g, t, NT);
}

// Registers cap the weight prefetch of the 64-row tile at 2 slabs (3 spilled,
// and one block an SM with 6 lost everywhere but the 1024-row matrices:
// notes/cuda-kernels.md, s12r3). _m2d1: 4 warps of two m16 tiles (128
// threads, 3 blocks an SM), each x fragment feeding two mma, one weight
// slab in flight: faster on matrices of up to 4096 rows (s13r3).
#define QMM(NAME, NB, D, MT, W, MINB)                                                                           \
    extern "C" __global__ void __launch_bounds__(32 * W, MINB) NAME(QMM_PARAMS) {                              \
        qmm4_impl<NB, D, MT, W>(QMM_ARGS);                                                                     \
    }
QMM(qmm4_bf_64, 8, 2, 1, 8, 2) QMM(qmm4_bf_64_m2d1, 8, 1, 2, 4, 3)
