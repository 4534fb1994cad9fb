// Grouped expert GEMM for MoE steps with many tokens (prefill).
//
// The per-token path (gemv.cu, eidx) reads each chosen expert's weights
// once per token: a 512-token prompt of a 128-expert, top-8 model reads
// every expert ~32 times per layer. Here the (token, slot) pairs are
// sorted by expert on the device, each expert's run padded to a multiple
// of MOE_TILE rows (as vLLM's moe_align_block_size), and one tensor-core
// block takes a tile of MOE_TILE rows of one expert: the weights are read
// once per tile instead of once per row.
//
// Pipeline (no host sync, so a step stays capturable in a graph):
//   moe_align      counts, padded offsets, sorted pairs, tile -> expert
//   moe_gather     x rows into expert order (padding rows left as they are)
//   moe_qmma4_*    gate and up (grid.z) on the tensor cores, 4-bit weights
//                  (affine, mxfp4, nvfp4) dequantized on the fly by
//                  qmma4_impl (mma.cu)
//   moe_act        act(gate) * up over the real tiles only
//   moe_qmma4_*    down
//   moe_unsort_sum dst[t] = sum_k wts[t,k] * y[row of (t,k)], fixed k order
//
// Rows of a tile are independent columns of the mma (the activation scale
// is per row and slab), so a row's result does not depend on which other
// rows share its tile: the atomics that order the rows inside an expert's
// run change nothing in the output.

#define MOE_TILE 32    // rows per tile: qmma4_impl with NT = 4 column tiles of 8
#define MOE_MAXE 1024  // experts the align kernel's shared counters hold

// moe_align: one block. idx holds P = T*topk expert ids (pair i = t*topk +
// slot). Writes sorted[row] = pair or -1 (padding) for rows below
// ntiles*MOE_TILE, inv[pair] = its row, tileE[tile] = expert | real rows
// << 16 (a tile's real rows come first), *ntiles.
extern "C" __global__ void __launch_bounds__(1024) moe_align(const int* idx, int P, int E, int* sorted, int* inv, int* tileE,
                                                             int* ntiles) {
    __shared__ int cnt[MOE_MAXE], off[MOE_MAXE + 1];
    const int tid = threadIdx.x, lane = tid & 31;
    for (int e = tid; e < E; e += blockDim.x) cnt[e] = 0;
    grid_dep_start();
    __syncthreads();
    for (int i = tid; i < P; i += blockDim.x) atomicAdd(&cnt[idx[i]], 1);
    __syncthreads();
    // Exclusive scan of the padded counts by warp 0, 32 experts a round.
    if (tid < 32) {
        int run = 0;
        for (int base = 0; base < E; base += 32) {
            const int e = base + lane;
            const int c = e < E ? (cnt[e] + MOE_TILE - 1) / MOE_TILE * MOE_TILE : 0;
            int s = c;
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                int v = __shfl_up_sync(0xffffffffu, s, o);
                if (lane >= o) s += v;
            }
            if (e < E) off[e] = run + s - c;
            run += __shfl_sync(0xffffffffu, s, 31);
        }
        if (lane == 0) {
            off[E] = run;
            *ntiles = run / MOE_TILE;
        }
    }
    __syncthreads();
    for (int e = tid; e < E; e += blockDim.x) {
        for (int r = off[e]; r < off[e + 1]; r += MOE_TILE) tileE[r / MOE_TILE] = e | min(MOE_TILE, cnt[e] - (r - off[e])) << 16;
        for (int r = off[e] + cnt[e]; r < off[e + 1]; r++) sorted[r] = -1;
    }
    __syncthreads();
    for (int e = tid; e < E; e += blockDim.x) cnt[e] = 0; // now the fill counters
    __syncthreads();
    for (int i = tid; i < P; i += blockDim.x) {
        const int e = idx[i];
        const int r = off[e] + atomicAdd(&cnt[e], 1);
        sorted[r] = i;
        inv[i] = r;
    }
}

// moe_gather: xs[row] = x[token of sorted[row]] for the real rows of each
// tile (the products read no padding row: qmma_loadx zeros past M). Grid
// (tiles, MOE_YS): block y takes rows y, y + MOE_YS, ... of its tile, so a
// decode step's tiles of a few rows still spread over the card; blocks
// past the real tile count exit at once.
#define MOE_YS 4
extern "C" __global__ void moe_gather(float* xs, const float* x, const int* sorted, const int* tileE, const int* ntiles,
                                      int topk, int K) {
    grid_dep_start();
    if ((int)blockIdx.x >= *ntiles) return;
    const int K4 = K >> 2, M = tileE[blockIdx.x] >> 16;
    for (int r = blockIdx.y; r < M; r += gridDim.y) {
        const long long row = (long long)blockIdx.x * MOE_TILE + r;
        const float4* src = reinterpret_cast<const float4*>(x + (long long)(sorted[row] / topk) * K);
        float4* d = reinterpret_cast<float4*>(xs + row * K);
        for (int c = threadIdx.x; c < K4; c += blockDim.x) d[c] = src[c];
    }
}

// moe_qmma4: y[tile's real rows, N] = xs[those rows, K] @ W_e^T for the tile's
// expert e (blockIdx.y = tile, blockIdx.x = 32 output rows). blockIdx.z
// picks the matrix: 0 (w0, y0), 1 (w1, y1), so gate and up share a launch.
// Requirements as qmma4_impl: 4 bits, group >= 64 (SBmx: a slab's scale
// words as one group), K % 64 == 0. The
// kernels call grid_dep_start first: ntiles and tileE come from moe_align.
// Two blocks an SM (<= 128 registers: half the slabs in flight a warp,
// against one block with twice the slabs): measured on the H200 (s19a,
// s19b), decode steps of synthetic Qwen3-30B-A3B at 32 / 64 sequences
// 17.3 / 20.4 ms against 23.2 / 27.2, gpt-oss-20b 20.0 / 21.4 against
// 22.9 / 26.2, and prefill at 2048 tokens 12.4k / 12.3k tok/s against
// 8.6k / 8.0k (notes/cuda-session-19.md).
template <class SB>
DEV void moe_qmma4(float* y0, float* y1, const float* xs, const u32* w0, const u32* sb0, const u32* w1, const u32* sb1,
                   const int* tileE, const int* ntiles, int N, int K, int gshift, long long wstride, long long sbstride) {
    const int tile = blockIdx.y;
    if (tile >= *ntiles) return; // block-uniform: qmma4_impl's barriers see every thread
    const int te = tileE[tile], M = te >> 16;
    const long long e = te & 0xffff, r0 = (long long)tile * MOE_TILE;
    float* y = blockIdx.z ? y1 : y0;
    const u32* w = blockIdx.z ? w1 : w0;
    const u32* sb = blockIdx.z ? sb1 : sb0;
    y += r0 * N, xs += r0 * K, w += e * wstride, sb += e * sbstride;
    // Only the real rows: sparse tiles (short prompts, many experts) skip
    // the padding's x loads, and up to 8 rows its mma too. (A third,
    // 16-row variant would take qmma4_impl's reduction buffers past 48 KB.)
    if (M <= 8) qmma4_impl<SB, 1, 2>(y, xs, w, sb, nullptr, N, K, M, gshift, N, K);
    else qmma4_impl<SB, 4, 1>(y, xs, w, sb, nullptr, N, K, M, gshift, N, K);
}
#define MOE_QMMA_PARAMS                                                                                              \
    float *y0, float *y1, const float *xs, const u32 *w0, const u32 *sb0, const u32 *w1, const u32 *sb1,              \
        const int *tileE, const int *ntiles, int N, int K, int gshift, long long wstride, long long sbstride
#define MOE_QMMA_ARGS y0, y1, xs, w0, sb0, w1, sb1, tileE, ntiles, N, K, gshift, wstride, sbstride
extern "C" __global__ void __launch_bounds__(256, 2) moe_qmma4_bf(MOE_QMMA_PARAMS) {
    grid_dep_start();
    moe_qmma4<SBbf>(MOE_QMMA_ARGS);
}
extern "C" __global__ void __launch_bounds__(256, 2) moe_qmma4_f32(MOE_QMMA_PARAMS) {
    grid_dep_start();
    moe_qmma4<SBf32>(MOE_QMMA_ARGS);
}
// The 4-bit floating-point modes (SBmx, mma.cu): mxfp4 (fp: a scale word a
// group of 32) and nvfp4 (fp2: a word a pair of groups of 16), gshift 6
// (a uint2 of scale words a slab). mxfp8's byte codes are not in
// qmma4_impl's word layout: it keeps the per-token path.
extern "C" __global__ void __launch_bounds__(256, 2) moe_qmma4_fp(MOE_QMMA_PARAMS) {
    grid_dep_start();
    moe_qmma4<SBmx<false>>(MOE_QMMA_ARGS);
}
extern "C" __global__ void __launch_bounds__(256, 2) moe_qmma4_fp2(MOE_QMMA_PARAMS) {
    grid_dep_start();
    moe_qmma4<SBmx<true>>(MOE_QMMA_ARGS);
}

// moe_act: g = act(g + gb) * (u + ub) over the real rows of each tile
// (act: gate_act's code, or MOE_CLAMPED for swiglu_clamped with alpha and
// limit); gb and ub, when set, are the experts' gate and up biases
// ([experts][N], dtype bdt as dense_at) of the tile's expert (gpt-oss).
// Grid (tiles, any count: moeActBlocks on the Go side).
#define MOE_CLAMPED 4 // moeClamped on the Go side
extern "C" __global__ void moe_act(float* g, const float* u, const int* tileE, const int* ntiles, int N, int act,
                                   const void* gb, const void* ub, int bdt, float alpha, float limit) {
    grid_dep_start();
    if ((int)blockIdx.x >= *ntiles) return;
    const int te = tileE[blockIdx.x], n = (te >> 16) * N;
    const long long o = (long long)blockIdx.x * MOE_TILE * N, e = te & 0xffff;
    for (int i = blockIdx.y * blockDim.x + threadIdx.x; i < n; i += gridDim.y * blockDim.x) {
        const int c = i % N;
        const float bg = gb ? dense_at(gb, e * N + c, bdt) : 0.f, bu = ub ? dense_at(ub, e * N + c, bdt) : 0.f;
        const float x = g[o + i] + bg, y = u[o + i] + bu;
        g[o + i] = act == MOE_CLAMPED ? swiglu_clamped(x, y, alpha, limit) : gate_act(act, x) * y;
    }
}

// moe_unsort_sum: dst[t] = sum over slots k (in order) of wts[t,k] *
// (y[inv[t*topk+k]] + db[expert idx[t*topk+k]]); db (the experts' down
// biases, [experts][cols], dtype bdt) may be null. Grid (tokens, column
// blocks of blockDim.x).
extern "C" __global__ void moe_unsort_sum(float* dst, const float* y, const float* wts, const int* inv, int topk, int cols,
                                          const int* idx, const void* db, int bdt) {
    grid_dep_start();
    const int t = blockIdx.x;
    for (int c = blockIdx.y * blockDim.x + threadIdx.x; c < cols; c += gridDim.y * blockDim.x) {
        float acc = 0.f;
        for (int k = 0; k < topk; k++) {
            float v = y[(long long)inv[t * topk + k] * cols + c];
            if (db) v += dense_at(db, (long long)idx[t * topk + k] * cols + c, bdt);
            acc = fmaf(wts[t * topk + k], v, acc);
        }
        dst[(long long)t * cols + c] = acc;
    }
}

// The extras of gpt-oss's and Gemma 4's MoE blocks on the per-token path
// (moeGrouped in ops.go), where a step's slot outputs are [topk][T][N]:
//   moe_slot_bias  y[slot][t] += bias[e] for the slot's expert e (gate, up
//                  and down biases, [experts][N] dense of any dtype)
//   moe_swiglu     g = swiglu_clamped(g, u) elementwise
//   moe_scale_w    wts[i] *= scale[idx[i]] (per-expert scale, applied
//                  after the renormalisation, as the CPU backend does)

// moe_slot_bias: grid (T, topk), dt as dense_at.
extern "C" __global__ void moe_slot_bias(float* y, const void* bias, int dt, const int* idx, int T, int topk, int N) {
    grid_dep_start();
    const int t = blockIdx.x, k = blockIdx.y;
    const long long e = idx[t * topk + k];
    float* row = y + ((long long)k * T + t) * N;
    for (int c = threadIdx.x; c < N; c += blockDim.x) row[c] += dense_at(bias, e * N + c, dt);
}

// moe_swiglu: n elements, grid-stride.
extern "C" __global__ void moe_swiglu(float* g, const float* u, long long n, float alpha, float limit) {
    grid_dep_start();
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        g[i] = swiglu_clamped(g[i], u[i], alpha, limit);
}

// moe_scale_w: P = T*topk routing weights, one thread each.
extern "C" __global__ void moe_scale_w(float* wts, const int* idx, const float* scale, int P) {
    grid_dep_start();
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < P) wts[i] *= scale[idx[i]];
}
