// qgemvs: the one-row 4-bit product for large matrices (a decode step's
// gate/up, down and LM head), as a persistent kernel that streams the
// weights through shared memory.
//
// Why: the qgemvm kernels give each block one row group (8 rows): it
// loads its 16 KB, waits, computes, reduces and exits, so an SM has loads
// in flight only part of the time (Llama-3.1-8B gate/up: 0.56 of the copy
// rate). Here a block stays resident and walks the row groups
// blockIdx.x, blockIdx.x + gridDim.x, ...; each lane copies its chunk of
// the next S-1 row groups into its own shared-memory slots (cp.async, no
// registers held) while it computes the current one, so the weight reads
// never stop at a block boundary.
//
// The launch is a qgemvm launch (same arguments, same row groups of 8
// rows, same glu and multi-matrix forms; Go: gemvMulti, fuseGLU) with a
// grid of as many blocks as fit on the device at once. Each lane reads
// only the slots it filled, so the pipeline needs no barrier; one
// __syncthreads a row group sums the four warps' split-K partials. XR: K
// is exactly 128 chunks (4096 at 4 bits), each lane has one chunk of
// every row, and its 32 activations stay in registers for all row groups.

// qs_cp4/qs_cp16: a 4- or 16-byte cp.async into shared memory (weights
// bypass L1: they are read once).
DEV void qs_cp16(u32 dst, const void* src) { asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory"); }
DEV void qs_cp4(u32 dst, const void* src) { asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(dst), "l"(src) : "memory"); }
template <int N> DEV void qs_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

template <int NR, int S> struct QsSmem {
    uint4 w[S][NR][32 * QW]; // [slot][row][lane]: a warp's 16-byte reads are consecutive
    u32 s[S][NR][32 * QW];   // the chunk's group scale and bias (bf16 pair)
};

template <int NR, int S, bool XR>
DEV void qgemv_stream_impl(QMULTI_PARAMS) {
    constexpr int BITS = 4, EPC = 32, L = 32 * QW;
    typedef SBbf SB;
    extern __shared__ __align__(16) unsigned char qs_raw[];
    QsSmem<NR, S>& sm = *reinterpret_cast<QsSmem<NR, S>*>(qs_raw);
    __shared__ float red[2][QW][NR];
    grid_dep_launch();
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    const int nc = K / EPC;
    const int groups = glu ? (N0 + NR / 2 - 1) / (NR / 2) : nb0 + nb1 + (w2 ? (N2 + NR - 1) / NR : 0);

    // The producer runs S-1 items ahead of the consumer; an item is one
    // chunk (this lane's) of NR rows of one row group. Every produce
    // commits a group, empty past the end, so wait_group<S-1> always
    // means "the item about to be consumed has landed".
    int pu = blockIdx.x, pc = t, pslot = 0;
    auto produce = [&]() {
        if (pu < groups) {
            const uint4* wr[NR];
            const u32* sr[NR];
            int row0, Na;
            multi_rows<BITS, SB, NR>(pu, 0, 1, QMULTI_ARGS, wr, sr, row0, Na);
#pragma unroll
            for (int r = 0; r < NR; r++) {
                qs_cp16(fa_smem(&sm.w[pslot][r][t]), wr[r] + pc);
                qs_cp4(fa_smem(&sm.s[pslot][r][t]), sr[r] + ((pc * EPC) >> gshift));
            }
            pc += L;
            if (pc >= nc) pc = t, pu += gridDim.x;
        }
        fa_commit();
        pslot = pslot + 1 == S ? 0 : pslot + 1;
    };
#pragma unroll
    for (int i = 0; i < S - 1; i++) produce(); // weights only: before the wait
    grid_dep_wait();

    float xv[EPC];
    auto load_x = [&](int c) {
        const float4* xp = reinterpret_cast<const float4*>(x + c * EPC);
#pragma unroll
        for (int i = 0; i < EPC / 4; i++) {
            float4 f = xp[i];
            xv[4 * i] = f.x, xv[4 * i + 1] = f.y, xv[4 * i + 2] = f.z, xv[4 * i + 3] = f.w;
        }
    };
    if (XR) load_x(t);
    int cslot = 0, par = 0;
    for (int u = blockIdx.x; u < groups; u += gridDim.x, par ^= 1) {
        float acc[NR];
#pragma unroll
        for (int r = 0; r < NR; r++) acc[r] = 0.f;
        for (int c = t; c < nc; c += L) {
            produce();
            qs_wait<S - 1>();
            uint4 wv[NR];
            u32 sv[NR];
#pragma unroll
            for (int r = 0; r < NR; r++) wv[r] = sm.w[cslot][r][t], sv[r] = sm.s[cslot][r][t];
            if (!XR) load_x(c);
            chunk_fma<BITS, SB, NR>(acc, wv, sv, xv);
            cslot = cslot + 1 == S ? 0 : cslot + 1;
        }
        // Split-K sums: red alternates between two buffers, so one barrier
        // a row group suffices (a warp can be at most one group ahead).
#pragma unroll
        for (int r = 0; r < NR; r++) {
            float v = warp_sum(acc[r]);
            if (lane == 0) red[par][warp][r] = v;
        }
        __syncthreads();
        const uint4* wr[NR];
        const u32* sr[NR];
        int row0, Na;
        multi_rows<BITS, SB, NR>(u, 0, 1, QMULTI_ARGS, wr, sr, row0, Na);
        if (glu) {
            if (t < NR / 2 && row0 + t < N0) {
                const int row = row0 + t;
                float g = 0.f, v = 0.f;
#pragma unroll
                for (int k = 0; k < QW; k++) g += red[par][k][t], v += red[par][k][t + NR / 2];
                g += bias0 ? bias0[row] : 0.f;
                v += bias1 ? bias1[row] : 0.f;
                y0[row] = g, y1[row] = v;
                d[row] = glu_act(glu, g) * v;
            }
        } else if (t < NR && row0 + t < Na) {
            const int row = row0 + t;
            float v = 0.f;
#pragma unroll
            for (int k = 0; k < QW; k++) v += red[par][k][t];
            const int m = u < nb0 ? 0 : u < nb0 + nb1 ? 1 : 2;
            const float* bias = m == 0 ? bias0 : m == 1 ? bias1 : bias2;
            (m == 0 ? y0 : m == 1 ? y1 : y2)[row] = v + (bias ? bias[row] : 0.f);
        }
    }
    qs_wait<0>();
}

// S = 4 stages (80 KB of shared memory, two blocks an SM) by default; the
// _s3 (three blocks an SM) and _s6 (one) variants are for measuring
// (MLXCEL_CUDA_STREAM=3 or 6). Go: streamSmem must match QsSmem.
extern "C" __global__ void __launch_bounds__(128) qgemvs4_bf(QMULTI_PARAMS) { qgemv_stream_impl<8, 4, false>(QMULTI_ARGS); }
extern "C" __global__ void __launch_bounds__(128) qgemvs4_bf_x(QMULTI_PARAMS) { qgemv_stream_impl<8, 4, true>(QMULTI_ARGS); }
extern "C" __global__ void __launch_bounds__(128) qgemvs4_bf_s3(QMULTI_PARAMS) { qgemv_stream_impl<8, 3, false>(QMULTI_ARGS); }
extern "C" __global__ void __launch_bounds__(128) qgemvs4_bf_s3_x(QMULTI_PARAMS) { qgemv_stream_impl<8, 3, true>(QMULTI_ARGS); }
extern "C" __global__ void __launch_bounds__(128) qgemvs4_bf_s6(QMULTI_PARAMS) { qgemv_stream_impl<8, 6, false>(QMULTI_ARGS); }
extern "C" __global__ void __launch_bounds__(128) qgemvs4_bf_s6_x(QMULTI_PARAMS) { qgemv_stream_impl<8, 6, true>(QMULTI_ARGS); }
