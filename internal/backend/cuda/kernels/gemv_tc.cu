// qgemvt: the one-row 4-bit product on the tensor cores (groups of 64 or
// more), in the qgemvm launch form (same arguments: one to three matrices
// on one x, or gate/up with the gated activation; Go: gemvMulti).
//
// Why: the f32 kernel (qgemv_multi_impl) spends 12 integer instructions
// per 8 weights (shifts, masks, 8 byte permutes) and the H200's integer
// pipe runs at half the FP32 rate, so it sets the time: 14336x4096 takes
// as long at 4 bits as at 8 (15 against 17 us), 0.57 of the copy rate.
// Here a word of 8 weights costs one shift, four LOP3 and four f16 ops
// (Marlin's trick: a nibble pair OR 0x6400 is the f16 pair 1024+q, or
// 1024+16q for the high nibbles, and one HSUB2 or HFMA2 leaves q-8
// exactly), then an mma.m16n8k16 sums 8 weights a lane with f32
// accumulation (mma.cu explains the fragment layout and the x scaling).
//
// One activation row uses one column of the mma's 8. Each 8-lane row of
// the warp (g) prepares the x of a different 64-wide slab (loads, scale,
// f16 pack: the qmma4 helpers), then for slab j every lane takes lane
// (j, t)'s fragments by shuffle: all 8 columns carry slab j, column 0 is
// read. So the x work per slab is an eighth of qmma4's.
//
// Geometry: a block of QT_W warps (8; the _w4 variant 4) takes 16 weight rows (one tile: rows g
// and g+8 of each lane; with glu, 8 gate rows and the same 8 up rows);
// the warps split K by groups of 8 slabs (512 weights), each warp loading
// a whole group's weights before its math.

// qt_row points a lane at row g+8h of block bx's tile: its words (the
// lane's 8-byte column t of each slab) and its scale row; row and m give
// the output row and matrix (0-2), valid when row < the matrix's N.
template <class SB>
DEV void qt_row(int bx, int h, int g, int t, QMULTI_PARAMS, const uint2*& wp, const u32*& sp, int& row, int& m) {
    constexpr int SBW = sizeof(typename SB::raw) / 4;
    const u32 *wm = w0, *sm = sb0;
    int n = N0;
    if (glu) {
        row = bx * 8 + g, m = h;
        if (h) wm = w1, sm = sb1;
    } else {
        int b = bx;
        m = 0;
        if (bx >= nb0 + nb1) b -= nb0 + nb1, m = 2, wm = w2, sm = sb2, n = N2;
        else if (bx >= nb0) b -= nb0, m = 1, wm = w1, sm = sb1, n = N1;
        row = b * 16 + g + 8 * h;
    }
    const int rr = min(row, n - 1);
    wp = reinterpret_cast<const uint2*>(wm + (long long)rr * (K >> 3)) + t;
    sp = sm + (long long)rr * (K >> gshift) * SBW;
}

template <class SB, int QT_W>
DEV void qgemvt_impl(QMULTI_PARAMS) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int ns = K >> 6, ngrp = (ns + 7) >> 3;
    const int bx = blockIdx.x;
    grid_dep_launch();
    const uint2* wp[2];
    const u32* sp[2];
    int row, mat; // the epilogue's concern (it asks qt_row again)
#pragma unroll
    for (int h = 0; h < 2; h++) qt_row<SB>(bx, h, g, t, QMULTI_ARGS, wp[h], sp[h], row, mat);
    // The first group's weights do not depend on the previous kernel
    // (a 128-byte line holds 4 slabs of a row).
    if (warp < ngrp)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            prefetch_l2(wp[h] + 4 * (warp * 8));
            prefetch_l2(wp[h] + 4 * min(warp * 8 + 4, ns - 1));
        }
    grid_dep_wait();
    float acc[2] = {0.f, 0.f}; // rows g and g+8 (column 0: lanes t = 0)

    for (int grp = warp; grp < ngrp; grp += QT_W) {
        const int s0 = grp * 8;
        uint2 wc[8][2];
        typename SB::raw sc[8][2];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int s = min(s0 + j, ns - 1); // past K: a repeat, never used
#pragma unroll
            for (int h = 0; h < 2; h++) wc[j][h] = wp[h][4 * s], sc[j][h] = SB::load(sp[h], (s << 6) >> gshift);
        }
        // Lane row g prepares slab s0+g (past K: a repeat, never used; no
        // branch, so the shuffles below see a converged warp).
        float f[16];
        qmma_loadx(f, x, 1, 0, min(s0 + g, ns - 1), 0, 0, t);
        u32 xb[8];
        float inv, sx;
        qmma_packx(f, xb, inv, sx);
#pragma unroll
        for (int j = 0; j < 8; j++) {
            // Every column takes slab j's x from lane row j. No branch in
            // this loop: after one the compiler cannot prove the warp
            // converged and emits the shuffles' slow collective form (s6r5's
            // kernel did: WARPSYNC/ENDCOLLECTIVE).
            u32 b[8];
#pragma unroll
            for (int i = 0; i < 8; i++) b[i] = __shfl_sync(0xffffffffu, xb[i], 4 * j + t);
            // Past K (the last group of a K that is not a multiple of 512):
            // the slab repeats and counts zero; a select, not a branch.
            const float keep = s0 + j < ns ? 1.f : 0.f;
            const float cinv = keep * __shfl_sync(0xffffffffu, inv, 4 * j);
            const float csx = keep * __shfl_sync(0xffffffffu, sx, 4 * j);
            float c[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int u = 0; u < 2; u++)
#pragma unroll
                for (int sh = 0; sh < 16; sh += 8) {
                    const u32 a0 = (u ? wc[j][0].y : wc[j][0].x) >> sh, a1 = (u ? wc[j][1].y : wc[j][1].x) >> sh;
                    const int k = u * 4 + (sh >> 2);
                    mma_f16(c, nib_lo(a0), nib_lo(a1), nib_hi(a0), nib_hi(a1), b[k], b[k + 1]);
                }
            float s0f, b0f, s1f, b1f;
            SB::get(sc[j][0], s0f, b0f);
            SB::get(sc[j][1], s1f, b1f);
            acc[0] = fmaf(s0f * cinv, c[0], fmaf(fmaf(8.f, s0f, b0f), csx, acc[0]));
            acc[1] = fmaf(s1f * cinv, c[2], fmaf(fmaf(8.f, s1f, b1f), csx, acc[1]));
        }
    }
    // Sum the warps' partials: red[warp][h * 8 + g].
    __shared__ float red[QT_W][16];
    if (t == 0) red[warp][g] = acc[0], red[warp][8 + g] = acc[1];
    __syncthreads();
    const int i = threadIdx.x;
    if (glu) {
        const int r = bx * 8 + i;
        if (i < 8 && r < N0) {
            float gv = 0.f, uv = 0.f;
#pragma unroll
            for (int k = 0; k < QT_W; k++) gv += red[k][i], uv += red[k][8 + i];
            gv += bias0 ? bias0[r] : 0.f;
            uv += bias1 ? bias1[r] : 0.f;
            y0[r] = gv, y1[r] = uv;
            d[r] = glu_act(glu, gv) * uv;
        }
    } else if (i < 16) {
        const uint2* wq;
        const u32* sq;
        int r, m;
        qt_row<SB>(bx, i >> 3, i & 7, 0, QMULTI_ARGS, wq, sq, r, m);
        if (r < (m == 0 ? N0 : m == 1 ? N1 : N2)) {
            float v = 0.f;
#pragma unroll
            for (int k = 0; k < QT_W; k++) v += red[k][i];
            const float* bias = m == 0 ? bias0 : m == 1 ? bias1 : bias2;
            (m == 0 ? y0 : m == 1 ? y1 : y2)[r] = v + (bias ? bias[r] : 0.f);
        }
    }
}
// Go: tcWarps must match (8; 4 for _w4).
extern "C" __global__ void __launch_bounds__(256, 2) qgemvt4_bf(QMULTI_PARAMS) { qgemvt_impl<SBbf, 8>(QMULTI_ARGS); }
extern "C" __global__ void __launch_bounds__(256, 2) qgemvt4_f32(QMULTI_PARAMS) { qgemvt_impl<SBf32, 8>(QMULTI_ARGS); }
extern "C" __global__ void __launch_bounds__(128, 4) qgemvt4_bf_w4(QMULTI_PARAMS) { qgemvt_impl<SBbf, 4>(QMULTI_ARGS); }
