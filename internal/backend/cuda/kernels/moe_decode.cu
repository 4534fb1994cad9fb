// MoE for a few tokens (decode) in three launches instead of seven
// (ops_moe_decode.go records them; the many-token path is moe.cu):
//
//   moe_router*    router GEMV, then, in the last block of each token
//                  (ticket), that token's softmax top-k as moe_route_w
//   moe_gateup*    grid (row blocks of inter, T, topk): act(gate) * up of
//                  the slot's expert, both matrices in one block
//   moe_down_sum*  grid (row blocks of hidden, T, topk): the slot's down
//                  rows into scratch; the last slot block of each (token,
//                  row block) sums the slots in slot order into dst
//
// Each kernel has an _x form for gpt-oss's extras (MDX below: biases, the
// clamped SwiGLU), a compile-time variant of the same impl.
//
// A batch-1 step reads 8 experts' 21 MB per layer, a few microseconds at
// HBM rate, so each launch's ramp and tail is a large share of the layer:
// this saves four per layer.
//
// Device code reused from the earlier files (concatenated in kernels.order
// order): dotchunk/unpack, dunpack, SBbf/SBf32 and QW (gemv.cu), ldcg and
// last_block (common.cu), dshfl_xor (misc.cu).
//
// Rows are split as in the _g64/_g32 GEMV kernels: a block of MD_THREADS
// lanes is 128/L row groups of L lanes, each group its own MD_NR rows, so
// short rows (K = 768 or 2048 at 4 bits: 24 or 64 chunks of 16 bytes) do
// not leave most lanes idle. The Go side picks L (rowGroupLanes) and sizes
// the grids to match.

#define MD_THREADS (32 * QW) // 128: four warps
#define MD_NR 8              // rows per row group (gate and up: 4 of each)
#define MD_MAXE 1024         // experts the routing handles (as moe_route_w)
#ifndef MOE_CLAMPED
#define MOE_CLAMPED 4 // moeClamped on the Go side (as moe.cu)
#endif

// MDX are gpt-oss's extras for the _x kernels (the X template argument;
// the other kernels are instantiated with X false, so none of this is in
// their code): the router bias rb (f32 [E]), the gate, up and down
// biases ([E][N] dense, dtype codes as dense_at; null: none), and the
// clamped SwiGLU's constants (act MOE_CLAMPED). The biases enter where
// the grouped path adds them (moe_slot_bias): on the logits, on gate and
// up before the activation, on each slot's down output before the
// weighted sum, so the down bias is weighted by the routing weight.
struct MDX {
    const float* rb;
    const void *gb, *ub, *db;
    int gdt, udt, ddt;
    float alpha, limit;
};

// md_row0 is the first row of this thread's row group when each group
// takes NR rows.
template <int L, int NR>
DEV int md_row0() {
    return (blockIdx.x * (MD_THREADS / L) + (L == MD_THREADS ? 0 : (int)threadIdx.x / L)) * NR;
}

// md_prefetch asks L2 for this lane's chunks of its group's MD_NR rows of
// w ([N][K] at BITS bits per element; 16 for bf16). Weights are constant,
// so this may run before grid_dep_wait (as in qgemv_impl).
template <int BITS, int L>
DEV void md_prefetch(const u32* w, int N, int K) {
    const int nc = K * BITS / 128, li = threadIdx.x % L, row0 = md_row0<L, MD_NR>();
#pragma unroll
    for (int r = 0; r < MD_NR; r++) {
        const uint4* p = reinterpret_cast<const uint4*>(w + (long long)min(row0 + r, N - 1) * (K * BITS / 32));
        for (int c = li; c < nc; c += L) prefetch_l2(p + c);
    }
}

// md_x loads the N floats of x from element e0 into xv.
template <int N>
DEV void md_x(float (&xv)[N], const float* x, int e0) {
    float4 f[N / 4];
    const float4* xp = reinterpret_cast<const float4*>(x + e0);
#pragma unroll
    for (int i = 0; i < N / 4; i++) f[i] = xp[i]; // all loads before any use
#pragma unroll
    for (int i = 0; i < N / 4; i++) {
        xv[4 * i] = f[i].x; xv[4 * i + 1] = f[i].y; xv[4 * i + 2] = f[i].z; xv[4 * i + 3] = f[i].w;
    }
}

// qdots adds this lane's share (chunks li, li+L, ...) of NR quantized rows'
// dot products with x (K floats) to acc: the one-row qgemv arithmetic
// (dotchunk), one x chunk load shared by the NR rows.
template <int BITS, class SB, int NR, int L>
DEV void qdots(float (&acc)[NR], const float* x, const uint4* (&wr)[NR], const u32* (&sr)[NR], int nc, int gshift, int li) {
    constexpr int EPC = 128 / BITS; // elements per 16-byte chunk
    for (int c = li; c < nc; c += L) {
        uint4 wv[NR];
        typename SB::raw sv[NR];
        load_chunk<BITS, SB, NR>(wv, sv, wr, sr, c, gshift);
        float xv[EPC];
        md_x<EPC>(xv, x, c * EPC);
        chunk_fma<BITS, SB, NR>(acc, wv, sv, xv);
    }
}

// bfdots is qdots for dense bf16 rows (8 elements per 16-byte chunk).
template <int NR, int L>
DEV void bfdots(float (&acc)[NR], const float* x, const uint4* (&wr)[NR], int nc, int li) {
    for (int c = li; c < nc; c += L) {
        uint4 wv[NR];
#pragma unroll
        for (int r = 0; r < NR; r++) wv[r] = wr[r][c];
        float xv[8];
        md_x<8>(xv, x, c * 8);
#pragma unroll
        for (int r = 0; r < NR; r++) {
            float f[8];
            dunpack<BF16>(wv[r], f);
#pragma unroll
            for (int e = 0; e < 8; e++) acc[r] = fmaf(xv[e], f[e], acc[r]);
        }
    }
}

// md_warps sums each accumulator over its warp into red[warp][r]; then
// md_group adds row r over the warps of this thread's row group (in warp
// order, as finish does).
template <int NR>
DEV void md_warps(const float (&acc)[NR], float (*red)[NR]) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int r = 0; r < NR; r++) {
        float v = warp_sum(acc[r]);
        if (lane == 0) red[warp][r] = v;
    }
    __syncthreads();
}
template <int NR, int L>
DEV float md_group(const float (*red)[NR], int r) {
    constexpr int wpg = L / 32;
    const int w0 = L == MD_THREADS ? 0 : ((int)threadIdx.x / L) * wpg;
    float v = 0.f;
#pragma unroll
    for (int g = 0; g < wpg; g++) v += red[w0 + g][r];
    return v;
}

// md_route_block routes one token with the whole block (all threads call
// it). route_warp (misc.cu, moe_route_w's routine) picks the k experts in k
// rounds of warp argmax, each with a double exp; here every thread ranks
// its experts against all E at once (rank = experts ahead of it: larger,
// or equal and lower index, the order route_warp picks in; NaN counts as
// -inf) and the ranks below k write themselves. Float math: the weights
// agree with route_warp's to float rounding, the choice is the same.
DEV void md_route_block(const float* lg, int E, int topk, int renorm, int* idx, float* wts) {
    __shared__ float l[MD_MAXE], red[32], pk[16];
    __shared__ int ek[16];
    for (int e = threadIdx.x; e < E; e += MD_THREADS) {
        const float v = ldcg(lg + e);
        l[e] = v != v ? NEG_INF : v;
    }
    __syncthreads();
    float mx = NEG_INF;
    for (int e = threadIdx.x; e < E; e += MD_THREADS) mx = fmaxf(mx, l[e]);
    mx = block_max(mx, red);
    float sum = 0.f, top = 0.f;
    for (int e = threadIdx.x; e < E; e += MD_THREADS) {
        const float v = l[e], pv = expf(v - mx);
        sum += pv;
        int rank = 0;
#pragma unroll 4
        for (int j = 0; j < E; j++) {
            const float u = l[j];
            rank += (u > v) | ((u == v) & (j < e));
        }
        if (rank < topk) pk[rank] = pv, ek[rank] = e, top += pv;
    }
    sum = block_sum(sum, red);
    top = block_sum(top, red); // (its barriers also publish pk/ek)
    if (threadIdx.x < topk) {
        idx[threadIdx.x] = ek[threadIdx.x];
        wts[threadIdx.x] = pk[threadIdx.x] / (renorm ? top : sum);
    }
}

// moe_router: grid (row blocks of E, T), MD_THREADS threads. BITS 4 or 8:
// quantized router (scale pairs SB); BITS 16: dense bf16 (sb unused).
// logits[t][e] = x[t] . w[e]; the last block of token t to finish (ticket
// cnt[t], reset for the next launch) routes it into idx/wts[t*topk..]
// with the whole block (md_route_block). The kernels prefetch their
// weight rows and wait (grid_dep_wait) first.
#define MR_PARAMS                                                                                                 \
    const float *x, const u32 *w, const u32 *sb, int E, int K, int gshift, float *logits, int *cnt, int topk, int renorm, \
        int *idx, float *wts
#define MR_ARGS x, w, sb, E, K, gshift, logits, cnt, topk, renorm, idx, wts
template <int BITS, class SB, int L, bool X = false>
DEV void moe_router_impl(MR_PARAMS, const float* rb = nullptr) {
    const int t = blockIdx.y, li = threadIdx.x % L, row0 = md_row0<L, MD_NR>();
    const int nw = K * BITS / 32, ng = K >> gshift;
    const uint4* wr[MD_NR];
    const u32* sr[MD_NR];
#pragma unroll
    for (int r = 0; r < MD_NR; r++) {
        const int rr = min(row0 + r, E - 1);
        wr[r] = reinterpret_cast<const uint4*>(w + (long long)rr * nw);
        sr[r] = sb + (long long)rr * ng * (sizeof(typename SB::raw) / 4);
    }
    const float* xin = x + (long long)t * K;
    float acc[MD_NR];
#pragma unroll
    for (int r = 0; r < MD_NR; r++) acc[r] = 0.f;
    if constexpr (BITS == 16)
        bfdots<MD_NR, L>(acc, xin, wr, K / 8, li);
    else
        qdots<BITS, SB, MD_NR, L>(acc, xin, wr, sr, K * BITS / 128, gshift, li);
    __shared__ float red[QW][MD_NR];
    md_warps<MD_NR>(acc, red);
    if (li < MD_NR && row0 + li < E) {
        float v = md_group<MD_NR, L>(red, li);
        if constexpr (X) v += rb[row0 + li]; // (the grouped path's GEMV bias)
        logits[(long long)t * E + row0 + li] = v;
    }
    // last_block fences each thread's logits before the ticket.
    if (!last_block(cnt + t, gridDim.x)) return;
    md_route_block(logits + (long long)t * E, E, topk, renorm, idx + t * topk, wts + t * topk);
}

// moe_gateup: grid (row blocks of N = inter, T, topk). The block's row
// groups take MD_NR/2 rows each of gate and of up of expert
// idx[t*topk+slot] (shared x chunk loads, as the glu mode of
// qgemv_multi_impl) and write a[slot][t][row] = act(gate) * up (act 1:
// gate_act's code).
//
// The next kernel (moe_down_*) may launch only once every block has
// passed its wait, i.e. once the router is done, so that it can read idx
// and load its expert's weights before its own wait.
#define GU_PARAMS                                                                                                \
    const float *x, const u32 *wg, const u32 *sbg, const u32 *wu, const u32 *sbu, int N, int K, int gshift,        \
        long long wstride, long long sbstride, const int *idx, int topk, int act, float *a
#define GU_ARGS x, wg, sbg, wu, sbu, N, K, gshift, wstride, sbstride, idx, topk, act, a

template <int BITS, class SB, int L, bool X = false>
DEV void moe_gateup_impl(GU_PARAMS, MDX mx = {}) {
    grid_dep_wait();
    grid_dep_launch();
    constexpr int H = MD_NR / 2;
    const int t = blockIdx.y, slot = blockIdx.z, li = threadIdx.x % L, row0 = md_row0<L, H>();
    const long long e = idx[t * topk + slot]; // from the router: read after grid_dep_wait
    const int nw = K * BITS / 32, ng = K >> gshift;
    const uint4* wr[MD_NR];
    const u32* sr[MD_NR];
#pragma unroll
    for (int r = 0; r < MD_NR; r++) {
        const bool up = r >= H;
        const int rr = min(row0 + (up ? r - H : r), N - 1);
        wr[r] = reinterpret_cast<const uint4*>((up ? wu : wg) + e * wstride + (long long)rr * nw);
        sr[r] = (up ? sbu : sbg) + e * sbstride + (long long)rr * ng * (sizeof(typename SB::raw) / 4);
    }
    float acc[MD_NR];
#pragma unroll
    for (int r = 0; r < MD_NR; r++) acc[r] = 0.f;
    qdots<BITS, SB, MD_NR, L>(acc, x + (long long)t * K, wr, sr, K * BITS / 128, gshift, li);
    __shared__ float red[QW][MD_NR];
    md_warps<MD_NR>(acc, red);
    if (li < H && row0 + li < N) {
        float g = md_group<MD_NR, L>(red, li), u = md_group<MD_NR, L>(red, li + H);
        if constexpr (X) {
            if (mx.gb) g += dense_at(mx.gb, e * N + row0 + li, mx.gdt);
            if (mx.ub) u += dense_at(mx.ub, e * N + row0 + li, mx.udt);
            a[((long long)slot * gridDim.y + t) * N + row0 + li] =
                act == MOE_CLAMPED ? swiglu_clamped(g, u, mx.alpha, mx.limit) : gate_act(act, g) * u;
        } else {
            a[((long long)slot * gridDim.y + t) * N + row0 + li] = gate_act(act, g) * u;
        }
    }
}

// md_expert_rows points wr/sr at rows row0.. row0+MD_NR-1 (clamped to N-1)
// of expert e's weights (nw words a row) and scale pairs (ng groups a row).
template <class SB>
DEV void md_expert_rows(const uint4* (&wr)[MD_NR], const u32* (&sr)[MD_NR], const u32* w, const u32* sb, long long e,
                        long long wstride, long long sbstride, int row0, int N, int nw, int ng) {
#pragma unroll
    for (int r = 0; r < MD_NR; r++) {
        const int rr = min(row0 + r, N - 1);
        wr[r] = reinterpret_cast<const uint4*>(w + e * wstride + (long long)rr * nw);
        sr[r] = sb + e * sbstride + (long long)rr * ng * (sizeof(typename SB::raw) / 4);
    }
}

// moe_down_sum: grid (row blocks of N = hidden, T, topk). y[slot][t][row]
// = a[slot][t] . down[e][row] into scratch, then a ticket per (t, row
// block) (cnt[t*gridDim.x + bx], reset by the last): the last of the topk
// slot blocks to arrive sums the slots in slot order 0..topk-1 with the
// routing weights (as moe_sum: fmaf from zero), so the result does not
// depend on which block came last, and writes dst[t][row] (when dst is
// set) and adds it to res[t][row] (when res is set: the residual, so the
// model's Add can be folded in; dst and res must not alias).
//
// The router has finished when this kernel launches (gate/up triggers
// its launch after its own wait), so the block reads its expert from idx
// (past L1: ld.cg) and loads its lanes' first weight chunk before the
// wait, while gate/up still runs; only a (gate/up's output) is read after.
#define DS_PARAMS                                                                                               \
    float *dst, float *res, float *y, const float *a, const u32 *w, const u32 *sb, int N, int K, int gshift,      \
        long long wstride, long long sbstride, const int *idx, const float *wts, int topk, int *cnt
#define DS_ARGS dst, res, y, a, w, sb, N, K, gshift, wstride, sbstride, idx, wts, topk, cnt
template <int BITS, class SB, int L, bool X = false>
DEV void moe_down_sum_impl(DS_PARAMS, MDX mx = {}) {
    const int t = blockIdx.y, slot = blockIdx.z, T = gridDim.y, li = threadIdx.x % L, row0 = md_row0<L, MD_NR>();
    const int nw = K * BITS / 32, ng = K >> gshift, nc = K * BITS / 128;
    grid_dep_launch();
    const long long e = __ldcg(idx + t * topk + slot);
    const uint4* wr[MD_NR];
    const u32* sr[MD_NR];
    md_expert_rows<SB>(wr, sr, w, sb, e, wstride, sbstride, row0, N, nw, ng);
    uint4 wv[MD_NR];
    typename SB::raw sv[MD_NR];
    if (li < nc) load_chunk<BITS, SB, MD_NR>(wv, sv, wr, sr, li, gshift);
    grid_dep_wait();
    float acc[MD_NR];
#pragma unroll
    for (int r = 0; r < MD_NR; r++) acc[r] = 0.f;
    const float* x = a + ((long long)slot * T + t) * K;
    constexpr int EPC = 128 / BITS;
    for (int c = li; c < nc; c += L) {
        if (c != li) load_chunk<BITS, SB, MD_NR>(wv, sv, wr, sr, c, gshift);
        float xv[EPC];
        md_x<EPC>(xv, x, c * EPC);
        chunk_fma<BITS, SB, MD_NR>(acc, wv, sv, xv);
    }
    __shared__ float red[QW][MD_NR];
    md_warps<MD_NR>(acc, red);
    if (li < MD_NR && row0 + li < N) {
        float v = md_group<MD_NR, L>(red, li);
        if constexpr (X) v += dense_at(mx.db, e * N + row0 + li, mx.ddt); // (the slot's, before the weighted sum)
        y[((long long)slot * T + t) * N + row0 + li] = v;
    }
    if (!last_block(cnt + (long long)t * gridDim.x + blockIdx.x, topk)) return;
    // The block's rows: MD_THREADS/L groups of MD_NR. Every slot's partial
    // is loaded (ld.cg: other blocks wrote them) before any is summed.
    constexpr int rows = MD_THREADS / L * MD_NR;
    for (int i = threadIdx.x; i < rows; i += MD_THREADS) {
        const int row = blockIdx.x * rows + i;
        if (row >= N) break;
        float v[16];
#pragma unroll
        for (int k = 0; k < 16; k++) v[k] = k < topk ? ldcg(y + ((long long)k * T + t) * N + row) : 0.f;
        float s = 0.f;
#pragma unroll
        for (int k = 0; k < 16; k++)
            if (k < topk) s = fmaf(wts[t * topk + k], v[k], s);
        if (dst) dst[(long long)t * N + row] = s;
        if (res) res[(long long)t * N + row] += s;
    }
}

// moe_down_acc: grid (blocks of MD_NR rows of N = hidden, T), 32*NW
// threads, the moe_down_sum arguments. One block does every slot of its
// rows: warp w takes slots w, w+NW, ... (32 lanes a slot, chunks lane, lane+32, ... as
// the _g32 kernels), reduces each slot's MD_NR dot products over the warp
// into red[slot], and then threads r < MD_NR sum the slots in slot order
// with the routing weights (fmaf from zero). The sums are moe_down_sum's
// bit for bit, without its scratch y, ticket and second pass through L2.
// With 4 warps (two slots a warp for Qwen3-30B-A3B's 8) it lost: 423 against
// 439.6 tok/s (s9r4); the kernels now take 8 warps, a slot each. For topk
// >= 8; the Go side picks it. Each warp's first slot is read from idx and
// its first chunk loaded before the wait, the next slot's rows asked of L2.
template <int BITS, class SB, int NW, bool X = false>
DEV void moe_down_acc_impl(DS_PARAMS, MDX mx = {}) {
    const int t = blockIdx.y, T = gridDim.y, lane = threadIdx.x & 31, warp = threadIdx.x >> 5, row0 = blockIdx.x * MD_NR;
    const int nw = K * BITS / 32, ng = K >> gshift, nc = K * BITS / 128;
    constexpr int EPC = 128 / BITS;
    __shared__ float red[16][MD_NR];
    grid_dep_launch();
    for (int k = warp; k < topk; k += NW) {
        const long long e = __ldcg(idx + t * topk + k); // (past L1: before the wait)
        const uint4* wr[MD_NR];
        const u32* sr[MD_NR];
        md_expert_rows<SB>(wr, sr, w, sb, e, wstride, sbstride, row0, N, nw, ng);
        uint4 wv[MD_NR];
        typename SB::raw sv[MD_NR];
        const bool pl = k == warp; // first chunk loaded before the wait
        if (pl) {
            if (lane < nc) load_chunk<BITS, SB, MD_NR>(wv, sv, wr, sr, lane, gshift);
            if (k + NW < topk) { // the next slot's rows, into L2
                const long long e2 = __ldcg(idx + t * topk + k + NW);
#pragma unroll
                for (int r = 0; r < MD_NR; r++)
                    for (int c = lane; c < nc; c += 32)
                        prefetch_l2(reinterpret_cast<const uint4*>(w + e2 * wstride + (long long)min(row0 + r, N - 1) * nw) + c);
            }
            grid_dep_wait();
        }
        float acc[MD_NR];
#pragma unroll
        for (int r = 0; r < MD_NR; r++) acc[r] = 0.f;
        const float* x = a + ((long long)k * T + t) * K;
        for (int c = lane; c < nc; c += 32) {
            if (!pl || c != lane) load_chunk<BITS, SB, MD_NR>(wv, sv, wr, sr, c, gshift);
            float xv[EPC];
            md_x<EPC>(xv, x, c * EPC);
            chunk_fma<BITS, SB, MD_NR>(acc, wv, sv, xv);
        }
#pragma unroll
        for (int r = 0; r < MD_NR; r++) {
            float v = warp_sum(acc[r]);
            if constexpr (X) // the slot's down bias (rows past N clamped: not written)
                if (lane == 0) v += dense_at(mx.db, e * N + min(row0 + r, N - 1), mx.ddt);
            if (lane == 0) red[k][r] = 0.f + v; // (as md_group's sum over one warp)
        }
    }
    if (warp >= topk) grid_dep_wait(); // (a warp without a slot)
    __syncthreads();
    const int r = threadIdx.x;
    if (r < MD_NR && row0 + r < N) {
        float s = 0.f;
        for (int k = 0; k < topk; k++) s = fmaf(wts[t * topk + k], red[k][r], s);
        const long long o = (long long)t * N + row0 + r;
        if (dst) dst[o] = s;
        if (res) res[o] += s;
    }
}

// The kernels, one per weight kind (bits, scale pair type) and row-group
// width: L = 128 (no suffix), 64 (_g64) or 32 (_g32), as rowGroupLanes.
// Written out rather than macro-generated so that kernelNames finds them
// and each body shows its wait (gate/up and down: in the impl).
extern "C" __global__ void __launch_bounds__(128) moe_router4_bf(MR_PARAMS) { grid_dep_launch(); md_prefetch<4, 128>(w, E, K); grid_dep_wait(); moe_router_impl<4, SBbf, 128>(MR_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_router4_bf_g64(MR_PARAMS) { grid_dep_launch(); md_prefetch<4, 64>(w, E, K); grid_dep_wait(); moe_router_impl<4, SBbf, 64>(MR_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_router4_bf_g32(MR_PARAMS) { grid_dep_launch(); md_prefetch<4, 32>(w, E, K); grid_dep_wait(); moe_router_impl<4, SBbf, 32>(MR_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_router4_f32(MR_PARAMS) { grid_dep_launch(); md_prefetch<4, 128>(w, E, K); grid_dep_wait(); moe_router_impl<4, SBf32, 128>(MR_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_router4_f32_g64(MR_PARAMS) { grid_dep_launch(); md_prefetch<4, 64>(w, E, K); grid_dep_wait(); moe_router_impl<4, SBf32, 64>(MR_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_router4_f32_g32(MR_PARAMS) { grid_dep_launch(); md_prefetch<4, 32>(w, E, K); grid_dep_wait(); moe_router_impl<4, SBf32, 32>(MR_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_router8_bf(MR_PARAMS) { grid_dep_launch(); md_prefetch<8, 128>(w, E, K); grid_dep_wait(); moe_router_impl<8, SBbf, 128>(MR_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_router8_bf_g64(MR_PARAMS) { grid_dep_launch(); md_prefetch<8, 64>(w, E, K); grid_dep_wait(); moe_router_impl<8, SBbf, 64>(MR_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_router8_bf_g32(MR_PARAMS) { grid_dep_launch(); md_prefetch<8, 32>(w, E, K); grid_dep_wait(); moe_router_impl<8, SBbf, 32>(MR_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_router8_f32(MR_PARAMS) { grid_dep_launch(); md_prefetch<8, 128>(w, E, K); grid_dep_wait(); moe_router_impl<8, SBf32, 128>(MR_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_router8_f32_g64(MR_PARAMS) { grid_dep_launch(); md_prefetch<8, 64>(w, E, K); grid_dep_wait(); moe_router_impl<8, SBf32, 64>(MR_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_router8_f32_g32(MR_PARAMS) { grid_dep_launch(); md_prefetch<8, 32>(w, E, K); grid_dep_wait(); moe_router_impl<8, SBf32, 32>(MR_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_router_bf16(MR_PARAMS) { grid_dep_launch(); md_prefetch<16, 128>(w, E, K); grid_dep_wait(); moe_router_impl<16, SBbf, 128>(MR_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_router_bf16_g64(MR_PARAMS) { grid_dep_launch(); md_prefetch<16, 64>(w, E, K); grid_dep_wait(); moe_router_impl<16, SBbf, 64>(MR_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_router_bf16_g32(MR_PARAMS) { grid_dep_launch(); md_prefetch<16, 32>(w, E, K); grid_dep_wait(); moe_router_impl<16, SBbf, 32>(MR_ARGS); }

//kernels:part
extern "C" __global__ void __launch_bounds__(128) moe_gateup4_bf(GU_PARAMS) { moe_gateup_impl<4, SBbf, 128>(GU_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup4_bf_g64(GU_PARAMS) { moe_gateup_impl<4, SBbf, 64>(GU_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup4_bf_g32(GU_PARAMS) { moe_gateup_impl<4, SBbf, 32>(GU_ARGS); }
// _o6: six blocks an SM (at most 80 registers), so Qwen3-30B-A3B's 768
// gate/up blocks are one wave instead of 1.16 at five (96 registers).
extern "C" __global__ void __launch_bounds__(128, 6) moe_gateup4_bf_o6(GU_PARAMS) { moe_gateup_impl<4, SBbf, 128>(GU_ARGS); }
extern "C" __global__ void __launch_bounds__(128, 6) moe_gateup4_bf_g64_o6(GU_PARAMS) { moe_gateup_impl<4, SBbf, 64>(GU_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup4_f32(GU_PARAMS) { moe_gateup_impl<4, SBf32, 128>(GU_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup4_f32_g64(GU_PARAMS) { moe_gateup_impl<4, SBf32, 64>(GU_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup4_f32_g32(GU_PARAMS) { moe_gateup_impl<4, SBf32, 32>(GU_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup8_bf(GU_PARAMS) { moe_gateup_impl<8, SBbf, 128>(GU_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup8_bf_g64(GU_PARAMS) { moe_gateup_impl<8, SBbf, 64>(GU_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup8_bf_g32(GU_PARAMS) { moe_gateup_impl<8, SBbf, 32>(GU_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup8_f32(GU_PARAMS) { moe_gateup_impl<8, SBf32, 128>(GU_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup8_f32_g64(GU_PARAMS) { moe_gateup_impl<8, SBf32, 64>(GU_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup8_f32_g32(GU_PARAMS) { moe_gateup_impl<8, SBf32, 32>(GU_ARGS); }

//kernels:part
extern "C" __global__ void __launch_bounds__(128) moe_down_sum4_bf(DS_PARAMS) { moe_down_sum_impl<4, SBbf, 128>(DS_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum4_bf_g64(DS_PARAMS) { moe_down_sum_impl<4, SBbf, 64>(DS_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum4_bf_g32(DS_PARAMS) { moe_down_sum_impl<4, SBbf, 32>(DS_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum4_f32(DS_PARAMS) { moe_down_sum_impl<4, SBf32, 128>(DS_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum4_f32_g64(DS_PARAMS) { moe_down_sum_impl<4, SBf32, 64>(DS_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum4_f32_g32(DS_PARAMS) { moe_down_sum_impl<4, SBf32, 32>(DS_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum8_bf(DS_PARAMS) { moe_down_sum_impl<8, SBbf, 128>(DS_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum8_bf_g64(DS_PARAMS) { moe_down_sum_impl<8, SBbf, 64>(DS_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum8_bf_g32(DS_PARAMS) { moe_down_sum_impl<8, SBbf, 32>(DS_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum8_f32(DS_PARAMS) { moe_down_sum_impl<8, SBf32, 128>(DS_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum8_f32_g64(DS_PARAMS) { moe_down_sum_impl<8, SBf32, 64>(DS_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum8_f32_g32(DS_PARAMS) { moe_down_sum_impl<8, SBf32, 32>(DS_ARGS); }
extern "C" __global__ void __launch_bounds__(256) moe_down_acc4_bf(DS_PARAMS) { moe_down_acc_impl<4, SBbf, 8>(DS_ARGS); }
extern "C" __global__ void __launch_bounds__(256) moe_down_acc4_f32(DS_PARAMS) { moe_down_acc_impl<4, SBf32, 8>(DS_ARGS); }
extern "C" __global__ void __launch_bounds__(256) moe_down_acc8_bf(DS_PARAMS) { moe_down_acc_impl<8, SBbf, 8>(DS_ARGS); }
extern "C" __global__ void __launch_bounds__(256) moe_down_acc8_f32(DS_PARAMS) { moe_down_acc_impl<8, SBf32, 8>(DS_ARGS); }
// The floating-point modes: SBfp (mxfp4, mxfp8) and SBfp2 (nvfp4 with
// rows of whole pairs of groups; other nvfp4 rows take the GEMV path).
//kernels:part
extern "C" __global__ void __launch_bounds__(128) moe_router4_fp(MR_PARAMS) { grid_dep_launch(); md_prefetch<4, 128>(w, E, K); grid_dep_wait(); moe_router_impl<4, SBfp, 128>(MR_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_router4_fp_g64(MR_PARAMS) { grid_dep_launch(); md_prefetch<4, 64>(w, E, K); grid_dep_wait(); moe_router_impl<4, SBfp, 64>(MR_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_router4_fp_g32(MR_PARAMS) { grid_dep_launch(); md_prefetch<4, 32>(w, E, K); grid_dep_wait(); moe_router_impl<4, SBfp, 32>(MR_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_router8_fp(MR_PARAMS) { grid_dep_launch(); md_prefetch<8, 128>(w, E, K); grid_dep_wait(); moe_router_impl<8, SBfp, 128>(MR_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_router8_fp_g64(MR_PARAMS) { grid_dep_launch(); md_prefetch<8, 64>(w, E, K); grid_dep_wait(); moe_router_impl<8, SBfp, 64>(MR_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_router8_fp_g32(MR_PARAMS) { grid_dep_launch(); md_prefetch<8, 32>(w, E, K); grid_dep_wait(); moe_router_impl<8, SBfp, 32>(MR_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup4_fp(GU_PARAMS) { moe_gateup_impl<4, SBfp, 128>(GU_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup4_fp_g64(GU_PARAMS) { moe_gateup_impl<4, SBfp, 64>(GU_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup4_fp_g32(GU_PARAMS) { moe_gateup_impl<4, SBfp, 32>(GU_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup8_fp(GU_PARAMS) { moe_gateup_impl<8, SBfp, 128>(GU_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup8_fp_g64(GU_PARAMS) { moe_gateup_impl<8, SBfp, 64>(GU_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup8_fp_g32(GU_PARAMS) { moe_gateup_impl<8, SBfp, 32>(GU_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum4_fp(DS_PARAMS) { moe_down_sum_impl<4, SBfp, 128>(DS_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum4_fp_g64(DS_PARAMS) { moe_down_sum_impl<4, SBfp, 64>(DS_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum4_fp_g32(DS_PARAMS) { moe_down_sum_impl<4, SBfp, 32>(DS_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum8_fp(DS_PARAMS) { moe_down_sum_impl<8, SBfp, 128>(DS_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum8_fp_g64(DS_PARAMS) { moe_down_sum_impl<8, SBfp, 64>(DS_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum8_fp_g32(DS_PARAMS) { moe_down_sum_impl<8, SBfp, 32>(DS_ARGS); }
extern "C" __global__ void __launch_bounds__(256) moe_down_acc4_fp(DS_PARAMS) { moe_down_acc_impl<4, SBfp, 8>(DS_ARGS); }
extern "C" __global__ void __launch_bounds__(256) moe_down_acc8_fp(DS_PARAMS) { moe_down_acc_impl<8, SBfp, 8>(DS_ARGS); }
//kernels:part
extern "C" __global__ void __launch_bounds__(128) moe_router4_fp2(MR_PARAMS) { grid_dep_launch(); md_prefetch<4, 128>(w, E, K); grid_dep_wait(); moe_router_impl<4, SBfp2, 128>(MR_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_router4_fp2_g64(MR_PARAMS) { grid_dep_launch(); md_prefetch<4, 64>(w, E, K); grid_dep_wait(); moe_router_impl<4, SBfp2, 64>(MR_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_router4_fp2_g32(MR_PARAMS) { grid_dep_launch(); md_prefetch<4, 32>(w, E, K); grid_dep_wait(); moe_router_impl<4, SBfp2, 32>(MR_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup4_fp2(GU_PARAMS) { moe_gateup_impl<4, SBfp2, 128>(GU_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup4_fp2_g64(GU_PARAMS) { moe_gateup_impl<4, SBfp2, 64>(GU_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup4_fp2_g32(GU_PARAMS) { moe_gateup_impl<4, SBfp2, 32>(GU_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum4_fp2(DS_PARAMS) { moe_down_sum_impl<4, SBfp2, 128>(DS_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum4_fp2_g64(DS_PARAMS) { moe_down_sum_impl<4, SBfp2, 64>(DS_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum4_fp2_g32(DS_PARAMS) { moe_down_sum_impl<4, SBfp2, 32>(DS_ARGS); }
extern "C" __global__ void __launch_bounds__(256) moe_down_acc4_fp2(DS_PARAMS) { moe_down_acc_impl<4, SBfp2, 8>(DS_ARGS); }

// The _x kernels: gpt-oss's extras (MDX) on the three-launch path, each
// stage's only when the call has them (the router's bias, gate/up's
// biases or clamp, down's bias), for the affine and mx weight kinds.
#define MRX_PARAMS MR_PARAMS, const float *rb
#define GUX_PARAMS GU_PARAMS, const void *gb, const void *ub, int gdt, int udt, float alpha, float limit
#define GUX_ARGS GU_ARGS, MDX{nullptr, gb, ub, nullptr, gdt, udt, 0, alpha, limit}
#define DSX_PARAMS DS_PARAMS, const void *db, int ddt
#define DSX_ARGS DS_ARGS, MDX{nullptr, nullptr, nullptr, db, 0, 0, ddt, 0.f, 0.f}
//kernels:part
extern "C" __global__ void __launch_bounds__(128) moe_router4_bf_x(MRX_PARAMS) { grid_dep_launch(); md_prefetch<4, 128>(w, E, K); grid_dep_wait(); moe_router_impl<4, SBbf, 128, true>(MR_ARGS, rb); }
extern "C" __global__ void __launch_bounds__(128) moe_router4_bf_g64_x(MRX_PARAMS) { grid_dep_launch(); md_prefetch<4, 64>(w, E, K); grid_dep_wait(); moe_router_impl<4, SBbf, 64, true>(MR_ARGS, rb); }
extern "C" __global__ void __launch_bounds__(128) moe_router4_bf_g32_x(MRX_PARAMS) { grid_dep_launch(); md_prefetch<4, 32>(w, E, K); grid_dep_wait(); moe_router_impl<4, SBbf, 32, true>(MR_ARGS, rb); }
extern "C" __global__ void __launch_bounds__(128) moe_router4_f32_x(MRX_PARAMS) { grid_dep_launch(); md_prefetch<4, 128>(w, E, K); grid_dep_wait(); moe_router_impl<4, SBf32, 128, true>(MR_ARGS, rb); }
extern "C" __global__ void __launch_bounds__(128) moe_router4_f32_g64_x(MRX_PARAMS) { grid_dep_launch(); md_prefetch<4, 64>(w, E, K); grid_dep_wait(); moe_router_impl<4, SBf32, 64, true>(MR_ARGS, rb); }
extern "C" __global__ void __launch_bounds__(128) moe_router4_f32_g32_x(MRX_PARAMS) { grid_dep_launch(); md_prefetch<4, 32>(w, E, K); grid_dep_wait(); moe_router_impl<4, SBf32, 32, true>(MR_ARGS, rb); }
extern "C" __global__ void __launch_bounds__(128) moe_router8_bf_x(MRX_PARAMS) { grid_dep_launch(); md_prefetch<8, 128>(w, E, K); grid_dep_wait(); moe_router_impl<8, SBbf, 128, true>(MR_ARGS, rb); }
extern "C" __global__ void __launch_bounds__(128) moe_router8_bf_g64_x(MRX_PARAMS) { grid_dep_launch(); md_prefetch<8, 64>(w, E, K); grid_dep_wait(); moe_router_impl<8, SBbf, 64, true>(MR_ARGS, rb); }
extern "C" __global__ void __launch_bounds__(128) moe_router8_bf_g32_x(MRX_PARAMS) { grid_dep_launch(); md_prefetch<8, 32>(w, E, K); grid_dep_wait(); moe_router_impl<8, SBbf, 32, true>(MR_ARGS, rb); }
extern "C" __global__ void __launch_bounds__(128) moe_router8_f32_x(MRX_PARAMS) { grid_dep_launch(); md_prefetch<8, 128>(w, E, K); grid_dep_wait(); moe_router_impl<8, SBf32, 128, true>(MR_ARGS, rb); }
extern "C" __global__ void __launch_bounds__(128) moe_router8_f32_g64_x(MRX_PARAMS) { grid_dep_launch(); md_prefetch<8, 64>(w, E, K); grid_dep_wait(); moe_router_impl<8, SBf32, 64, true>(MR_ARGS, rb); }
extern "C" __global__ void __launch_bounds__(128) moe_router8_f32_g32_x(MRX_PARAMS) { grid_dep_launch(); md_prefetch<8, 32>(w, E, K); grid_dep_wait(); moe_router_impl<8, SBf32, 32, true>(MR_ARGS, rb); }
extern "C" __global__ void __launch_bounds__(128) moe_router_bf16_x(MRX_PARAMS) { grid_dep_launch(); md_prefetch<16, 128>(w, E, K); grid_dep_wait(); moe_router_impl<16, SBbf, 128, true>(MR_ARGS, rb); }
extern "C" __global__ void __launch_bounds__(128) moe_router_bf16_g64_x(MRX_PARAMS) { grid_dep_launch(); md_prefetch<16, 64>(w, E, K); grid_dep_wait(); moe_router_impl<16, SBbf, 64, true>(MR_ARGS, rb); }
extern "C" __global__ void __launch_bounds__(128) moe_router_bf16_g32_x(MRX_PARAMS) { grid_dep_launch(); md_prefetch<16, 32>(w, E, K); grid_dep_wait(); moe_router_impl<16, SBbf, 32, true>(MR_ARGS, rb); }
//kernels:part
extern "C" __global__ void __launch_bounds__(128) moe_gateup4_bf_x(GUX_PARAMS) { moe_gateup_impl<4, SBbf, 128, true>(GUX_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup4_bf_g64_x(GUX_PARAMS) { moe_gateup_impl<4, SBbf, 64, true>(GUX_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup4_bf_g32_x(GUX_PARAMS) { moe_gateup_impl<4, SBbf, 32, true>(GUX_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup4_f32_x(GUX_PARAMS) { moe_gateup_impl<4, SBf32, 128, true>(GUX_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup4_f32_g64_x(GUX_PARAMS) { moe_gateup_impl<4, SBf32, 64, true>(GUX_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup4_f32_g32_x(GUX_PARAMS) { moe_gateup_impl<4, SBf32, 32, true>(GUX_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup4_fp_x(GUX_PARAMS) { moe_gateup_impl<4, SBfp, 128, true>(GUX_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup4_fp_g64_x(GUX_PARAMS) { moe_gateup_impl<4, SBfp, 64, true>(GUX_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup4_fp_g32_x(GUX_PARAMS) { moe_gateup_impl<4, SBfp, 32, true>(GUX_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup8_bf_x(GUX_PARAMS) { moe_gateup_impl<8, SBbf, 128, true>(GUX_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup8_bf_g64_x(GUX_PARAMS) { moe_gateup_impl<8, SBbf, 64, true>(GUX_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup8_bf_g32_x(GUX_PARAMS) { moe_gateup_impl<8, SBbf, 32, true>(GUX_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup8_f32_x(GUX_PARAMS) { moe_gateup_impl<8, SBf32, 128, true>(GUX_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup8_f32_g64_x(GUX_PARAMS) { moe_gateup_impl<8, SBf32, 64, true>(GUX_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup8_f32_g32_x(GUX_PARAMS) { moe_gateup_impl<8, SBf32, 32, true>(GUX_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup8_fp_x(GUX_PARAMS) { moe_gateup_impl<8, SBfp, 128, true>(GUX_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup8_fp_g64_x(GUX_PARAMS) { moe_gateup_impl<8, SBfp, 64, true>(GUX_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_gateup8_fp_g32_x(GUX_PARAMS) { moe_gateup_impl<8, SBfp, 32, true>(GUX_ARGS); }
//kernels:part
extern "C" __global__ void __launch_bounds__(128) moe_down_sum4_bf_x(DSX_PARAMS) { moe_down_sum_impl<4, SBbf, 128, true>(DSX_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum4_bf_g64_x(DSX_PARAMS) { moe_down_sum_impl<4, SBbf, 64, true>(DSX_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum4_bf_g32_x(DSX_PARAMS) { moe_down_sum_impl<4, SBbf, 32, true>(DSX_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum4_f32_x(DSX_PARAMS) { moe_down_sum_impl<4, SBf32, 128, true>(DSX_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum4_f32_g64_x(DSX_PARAMS) { moe_down_sum_impl<4, SBf32, 64, true>(DSX_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum4_f32_g32_x(DSX_PARAMS) { moe_down_sum_impl<4, SBf32, 32, true>(DSX_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum4_fp_x(DSX_PARAMS) { moe_down_sum_impl<4, SBfp, 128, true>(DSX_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum4_fp_g64_x(DSX_PARAMS) { moe_down_sum_impl<4, SBfp, 64, true>(DSX_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum4_fp_g32_x(DSX_PARAMS) { moe_down_sum_impl<4, SBfp, 32, true>(DSX_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum8_bf_x(DSX_PARAMS) { moe_down_sum_impl<8, SBbf, 128, true>(DSX_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum8_bf_g64_x(DSX_PARAMS) { moe_down_sum_impl<8, SBbf, 64, true>(DSX_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum8_bf_g32_x(DSX_PARAMS) { moe_down_sum_impl<8, SBbf, 32, true>(DSX_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum8_f32_x(DSX_PARAMS) { moe_down_sum_impl<8, SBf32, 128, true>(DSX_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum8_f32_g64_x(DSX_PARAMS) { moe_down_sum_impl<8, SBf32, 64, true>(DSX_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum8_f32_g32_x(DSX_PARAMS) { moe_down_sum_impl<8, SBf32, 32, true>(DSX_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum8_fp_x(DSX_PARAMS) { moe_down_sum_impl<8, SBfp, 128, true>(DSX_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum8_fp_g64_x(DSX_PARAMS) { moe_down_sum_impl<8, SBfp, 64, true>(DSX_ARGS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_sum8_fp_g32_x(DSX_PARAMS) { moe_down_sum_impl<8, SBfp, 32, true>(DSX_ARGS); }
extern "C" __global__ void __launch_bounds__(256) moe_down_acc4_bf_x(DSX_PARAMS) { moe_down_acc_impl<4, SBbf, 8, true>(DSX_ARGS); }
extern "C" __global__ void __launch_bounds__(256) moe_down_acc4_f32_x(DSX_PARAMS) { moe_down_acc_impl<4, SBf32, 8, true>(DSX_ARGS); }
extern "C" __global__ void __launch_bounds__(256) moe_down_acc4_fp_x(DSX_PARAMS) { moe_down_acc_impl<4, SBfp, 8, true>(DSX_ARGS); }
extern "C" __global__ void __launch_bounds__(256) moe_down_acc8_bf_x(DSX_PARAMS) { moe_down_acc_impl<8, SBbf, 8, true>(DSX_ARGS); }
extern "C" __global__ void __launch_bounds__(256) moe_down_acc8_f32_x(DSX_PARAMS) { moe_down_acc_impl<8, SBf32, 8, true>(DSX_ARGS); }
extern "C" __global__ void __launch_bounds__(256) moe_down_acc8_fp_x(DSX_PARAMS) { moe_down_acc_impl<8, SBfp, 8, true>(DSX_ARGS); }
