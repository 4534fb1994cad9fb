// Row-wise and elementwise ops. Every kernel takes its sizes as arguments
// and reads token ids and positions from the step's device buffers, so a
// step's launches are identical from one decode step to the next and can
// be replayed from a captured graph.

#define GRID_STRIDE(i, n) \
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n); i += (long long)gridDim.x * blockDim.x)

extern "C" __global__ void fill_f32(float* p, float v, long long n) { grid_dep_start(); GRID_STRIDE(i, n) p[i] = v; }

// token_id is this block's token: a negative id -(j+1) is a feed token,
// the id the last argmax left in feed[j] (async.go). A non-finite row's
// id (INT_MIN) embeds token 0: the engine fails that request and drops
// the step queued after it.
DEV long long token_id(const int* tokens, const int* feed) {
    const int id = tokens[blockIdx.x];
    return id >= 0 ? id : max(feed[-id - 1], 0);
}
// Embedding rows: dst[r] = table[tokens[r]], one block per row.
template <class T>
DEV void embed_dense(float* dst, const typename T::T* table, const int* tokens, const int* feed, int cols) {
    const long long id = token_id(tokens, feed);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) dst[(long long)blockIdx.x * cols + c] = T::at(table, id * cols + c);
}
extern "C" __global__ void embed_f32(float* d, const float* t, const int* tok, const int* feed, int cols) { grid_dep_start(); embed_dense<F32>(d, t, tok, feed, cols); }
extern "C" __global__ void embed_bf16(float* d, const u16* t, const int* tok, const int* feed, int cols) { grid_dep_start(); embed_dense<BF16>(d, t, tok, feed, cols); }
extern "C" __global__ void embed_f16(float* d, const u16* t, const int* tok, const int* feed, int cols) { grid_dep_start(); embed_dense<F16>(d, t, tok, feed, cols); }

template <class SB>
DEV void embed_q(float* dst, const u32* w, const u32* sb, const int* tokens, const int* feed, int cols, int bits, int gshift) {
    const long long id = token_id(tokens, feed);
    const int nw = (cols * bits + 31) / 32, ng = cols >> gshift;
    const u32* row = w + id * nw;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        float s, b;
        SB::get(SB::sel(SB::load(sb, id * ng + (c >> gshift)), c), s, b);
        dst[(long long)blockIdx.x * cols + c] = s * qf<SB>(qval(row, c, bits), bits) + b;
    }
}
extern "C" __global__ void embedq_bf(float* d, const u32* w, const u32* sb, const int* tok, const int* feed, int cols, int bits, int gs) { grid_dep_start();
    embed_q<SBbf>(d, w, sb, tok, feed, cols, bits, gs);
}
extern "C" __global__ void embedq_f32(float* d, const u32* w, const u32* sb, const int* tok, const int* feed, int cols, int bits, int gs) { grid_dep_start();
    embed_q<SBf32>(d, w, sb, tok, feed, cols, bits, gs);
}
extern "C" __global__ void embedq_fp(float* d, const u32* w, const u32* sb, const int* tok, const int* feed, int cols, int bits, int gs) { grid_dep_start();
    embed_q<SBfp>(d, w, sb, tok, feed, cols, bits, gs);
}
extern "C" __global__ void embedq_fp2(float* d, const u32* w, const u32* sb, const int* tok, const int* feed, int cols, int bits, int gs) { grid_dep_start();
    embed_q<SBfp2>(d, w, sb, tok, feed, cols, bits, gs);
}

// RMSNorm, one block per row. dst may alias x: each thread reads its
// elements before the reduction and writes the same ones after it.
//
// Rows of a multiple of 4 columns, up to 16 per thread, take the float4
// path: each thread loads all its elements (and the norm weights, before
// waiting on the previous kernel: they are constant) before any store. In
// the scalar loop of add_rmsnorm each store to sum (which may alias a or
// b) kept the next loads behind it, one memory round trip per 1024
// columns of a decode step's single row.
#define NORM_V 4 // float4s per thread in the vector path
DEV bool norm_vec(int cols) { return (cols & 3) == 0 && cols <= 4 * NORM_V * (int)blockDim.x; }

// norm_row is both kernels: with ADD, the row is a + b (written to sum,
// which may alias a or b) before it is normalised into dst.
template <bool ADD>
DEV void norm_row(float* sum, const float* a, const float* b, float* dst, const float* w, int cols, float eps, u16* dbf) {
    __shared__ float red[32];
    const long long o = (long long)blockIdx.x * cols;
    if (norm_vec(cols)) {
        const int n4 = cols >> 2;
        float4 wv[NORM_V], v[NORM_V];
#pragma unroll
        for (int k = 0; k < NORM_V; k++) {
            const int i = threadIdx.x + k * blockDim.x;
            wv[k] = w && i < n4 ? reinterpret_cast<const float4*>(w)[i] : f4(1.f, 1.f, 1.f, 1.f);
        }
        grid_dep_start();
        float ss = 0.f;
#pragma unroll
        for (int k = 0; k < NORM_V; k++) {
            const int i = threadIdx.x + k * blockDim.x;
            if (!ADD) {
                v[k] = i < n4 ? reinterpret_cast<const float4*>(a + o)[i] : f4(0.f, 0.f, 0.f, 0.f);
            } else if (i < n4) {
                const float4 x = reinterpret_cast<const float4*>(a + o)[i], y = reinterpret_cast<const float4*>(b + o)[i];
                v[k] = f4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
            } else {
                v[k] = f4(0.f, 0.f, 0.f, 0.f);
            }
            ss += f4dot(v[k]);
        }
        if (ADD)
#pragma unroll
            for (int k = 0; k < NORM_V; k++) {
                const int i = threadIdx.x + k * blockDim.x;
                if (i < n4) reinterpret_cast<float4*>(sum + o)[i] = v[k];
            }
        ss = block_sum(ss, red);
        const float inv = 1.f / sqrtf(ss / (float)cols + eps);
#pragma unroll
        for (int k = 0; k < NORM_V; k++) {
            const int i = threadIdx.x + k * blockDim.x;
            if (i < n4) {
                const float4 r = f4mul4(f4mul(v[k], inv), wv[k]);
                reinterpret_cast<float4*>(dst + o)[i] = r;
                if (dbf)
                    reinterpret_cast<uint2*>(dbf + o)[i] =
                        make_uint2(bf16rn(r.x) | (u32)bf16rn(r.y) << 16, bf16rn(r.z) | (u32)bf16rn(r.w) << 16);
            }
        }
        return;
    }
    grid_dep_start();
    float ss = 0.f;
    if (ADD) {
        for (int c = threadIdx.x; c < cols; c += blockDim.x) {
            float v = a[o + c] + b[o + c];
            sum[o + c] = v;
            ss = fmaf(v, v, ss);
        }
    } else {
        for (int c = threadIdx.x; c < cols; c += blockDim.x) ss = fmaf(a[o + c], a[o + c], ss);
    }
    ss = block_sum(ss, red);
    float inv = 1.f / sqrtf(ss / (float)cols + eps);
    const float* src = ADD ? sum : a; // this thread's own sums: visible to it
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        float v = src[o + c], r = w ? v * inv * w[c] : v * inv;
        dst[o + c] = r;
        if (dbf) dbf[o + c] = bf16rn(r);
    }
}
extern "C" __global__ void rmsnorm(float* dst, const float* x, const float* w, int cols, float eps, u16* dbf) {
    norm_row<false>(nullptr, x, nullptr, dst, w, cols, eps, dbf);
}

// add_rmsnorm fuses a residual add with the RMSNorm that reads its sum:
// sum = a + b (sum may alias a or b), dst = sum/rms(sum) * w. The Go side
// records it in place of an Add followed by such an RMSNorm; both outputs
// are written. One block per row.
extern "C" __global__ void add_rmsnorm(float* sum, const float* a, const float* b, float* dst, const float* w, int cols,
                                       float eps, u16* dbf) {
    norm_row<true>(sum, a, b, dst, w, cols, eps, dbf);
}

// RoPE in the rotate_half layout on x[rows, heads*headDim], in place; grid
// (rows, heads). The angle is taken in double: at position 1e5 a float
// angle is off by ~1e-2 rad.
extern "C" __global__ void rope(float* x, const int* pos, const float* invf, int heads, int headDim, int half, float scale,
                                int ld) { grid_dep_start();
    float* v = x + (long long)blockIdx.x * ld + blockIdx.y * headDim;
    double p = (double)pos[blockIdx.x];
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
        double s, c;
        sincos(p * (double)invf[i], &s, &c);
        float cs = (float)c * scale, sn = (float)s * scale;
        float x1 = v[i], x2 = v[i + half];
        v[i] = x1 * cs - x2 * sn;
        v[i + half] = x2 * cs + x1 * sn;
    }
}

// rope2 rotates two tensors at the same positions (a layer's q and k) in
// one launch: grid (rows, heads1 + heads2).
extern "C" __global__ void rope2(float* x1, int heads1, int ld1, float* x2, int ld2, const int* pos, const float* invf,
                                 int headDim, int half, float scale) { grid_dep_start();
    int h = blockIdx.y;
    float* v = h < heads1 ? x1 + (long long)blockIdx.x * ld1 + h * headDim
                          : x2 + (long long)blockIdx.x * ld2 + (h - heads1) * headDim;
    double p = (double)pos[blockIdx.x];
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
        double s, c;
        sincos(p * (double)invf[i], &s, &c);
        float cs = (float)c * scale, sn = (float)s * scale;
        float a = v[i], b = v[i + half];
        v[i] = a * cs - b * sn;
        v[i + half] = b * cs + a * sn;
    }
}

// The gated activations (and the norms above) also write a bf16 copy of
// their output to dbf when it is set: the Go side sets it when a many-row
// product reads the output next, which then skips its own f32_to_bf16 pass
// (same rounding, bf16rn).
extern "C" __global__ void gated_silu(float* d, const float* g, const float* u, long long n, u16* dbf) { grid_dep_start();
    GRID_STRIDE(i, n) {
        float x = g[i], v = x / (1.f + expf(-x)) * u[i];
        d[i] = v;
        if (dbf) dbf[i] = bf16rn(v);
    }
}
extern "C" __global__ void gated_gelu(float* d, const float* g, const float* u, long long n, u16* dbf) { grid_dep_start();
    GRID_STRIDE(i, n) {
        float x = g[i], v = 0.5f * x * (1.f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x))) * u[i];
        d[i] = v;
        if (dbf) dbf[i] = bf16rn(v);
    }
}
extern "C" __global__ void gated_gelu_erf(float* d, const float* g, const float* u, long long n, u16* dbf) { grid_dep_start();
    GRID_STRIDE(i, n) {
        float v = gate_act(3, g[i]) * u[i];
        d[i] = v;
        if (dbf) dbf[i] = bf16rn(v);
    }
}
extern "C" __global__ void add_f32(float* d, const float* a, const float* b, long long n) { grid_dep_start(); GRID_STRIDE(i, n) d[i] = a[i] + b[i]; }
extern "C" __global__ void scale_f32(float* x, float s, long long n) { grid_dep_start(); GRID_STRIDE(i, n) x[i] *= s; }
extern "C" __global__ void softcap_f32(float* x, float c, long long n) { grid_dep_start(); GRID_STRIDE(i, n) x[i] = c * tanhf(x[i] / c); }

// gather_rows copies src rows rows[i] to dst row i (one block per row).
extern "C" __global__ void gather_rows(float* dst, const float* src, const int* rows, int cols) { grid_dep_start();
    const float* s = src + (long long)rows[blockIdx.x] * cols;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) dst[(long long)blockIdx.x * cols + c] = s[c];
}

// argmax_pick keeps the better of (best, idx) and (ov, oi): the larger
// value, the lower index on a tie (NaN never wins, matching a `v > best`
// scan).
DEV void argmax_pick(float& best, int& idx, float ov, int oi) {
    if (ov > best || (ov == best && oi < idx)) { best = ov; idx = oi; }
}
// argmax_block reduces (best, idx) over the block (blockDim.x a multiple
// of 32); thread 0 gets the result.
DEV void argmax_block(float& best, int& idx) {
    __shared__ float bv[32];
    __shared__ int bi[32];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        argmax_pick(best, idx, __shfl_xor_sync(0xffffffffu, best, o), __shfl_xor_sync(0xffffffffu, idx, o));
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    if (lane == 0) { bv[w] = best; bi[w] = idx; }
    __syncthreads();
    if (w == 0) {
        best = lane < nw ? bv[lane] : NEG_INF;
        idx = lane < nw ? bi[lane] : 0x7fffffff;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            argmax_pick(best, idx, __shfl_xor_sync(0xffffffffu, best, o), __shfl_xor_sync(0xffffffffu, idx, o));
    }
}

// argmax_scan is the first index of the largest value of x[c0, c1) seen by
// this thread (0x7fffffff when none is above -inf). NaN or +Inf (a broken
// model; -inf is a mask) makes (+inf, INT_MIN), which wins every pick: the
// row's answer is then backend.NonFiniteRow.
DEV void argmax_scan(const float* x, int c0, int c1, float& best, int& idx) {
    best = NEG_INF, idx = 0x7fffffff;
    for (int c = c0 + threadIdx.x; c < c1; c += blockDim.x) {
        float v = x[c];
        if (!(v <= 3.402823466e38f)) { best = __int_as_float(0x7f800000); idx = (int)0x80000000; }
        else if (v > best) { best = v; idx = c; }
    }
}

// argmax_rows: the first index of the largest value of each row. One block
// per row. An all -inf row gives index 0, as the CPU scan does; a row
// holding NaN or +Inf, INT_MIN (backend.NonFiniteRow).
extern "C" __global__ void argmax_rows(int* out, const float* x, int cols) { grid_dep_start();
    float best;
    int idx;
    argmax_scan(x + (long long)blockIdx.x * cols, 0, cols, best, idx);
    argmax_block(best, idx);
    if (threadIdx.x == 0) out[blockIdx.x] = idx == 0x7fffffff ? 0 : idx;
}

// argmax_split is argmax_rows for long rows (a vocabulary of 128k-152k:
// one block took ~50 us, a loop of dependent round trips): grid (S, rows),
// block s scanning the s-th span of its row and leaving (value, index) in
// part[row][s]; the last of a row's blocks (ticket cnt[row]) picks among
// the S partials.
extern "C" __global__ void argmax_split(int* out, const float* x, int cols, float* part, int* cnt) { grid_dep_start();
    const int S = gridDim.x, row = blockIdx.y, span = (cols + S - 1) / S, c0 = blockIdx.x * span;
    float best;
    int idx;
    argmax_scan(x + (long long)row * cols, c0, min(cols, c0 + span), best, idx);
    argmax_block(best, idx);
    float* p = part + 2 * ((long long)row * S + blockIdx.x);
    if (threadIdx.x == 0) { p[0] = best; p[1] = __int_as_float(idx); }
    if (!last_block(cnt + row, S)) return;
    best = NEG_INF, idx = 0x7fffffff;
    for (int s = threadIdx.x; s < S; s += blockDim.x) {
        const float* q = part + 2 * ((long long)row * S + s);
        argmax_pick(best, idx, ldcg(q), __float_as_int(ldcg(q + 1)));
    }
    argmax_block(best, idx);
    if (threadIdx.x == 0) out[row] = idx == 0x7fffffff ? 0 : idx;
}

// moe_route: softmax over each token's router logits, top-k (ties to the
// lower expert id), optional renormalisation; one thread per token. Done in
// double like the CPU reference, so the chosen experts agree.
extern "C" __global__ void moe_route(const float* logits, int T, int E, int topk, int renorm, int* idx, float* wts) { grid_dep_start();
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T) return;
    const float* l = logits + (long long)t * E;
    double m = -1e308;
    for (int e = 0; e < E; e++) m = fmax(m, (double)l[e]);
    double sum = 0;
    for (int e = 0; e < E; e++) sum += exp((double)l[e] - m);
    int chosen[16];
    double pr[16], top = 0;
    for (int k = 0; k < topk; k++) {
        int best = -1;
        for (int e = 0; e < E; e++) {
            bool taken = false;
            for (int j = 0; j < k; j++) taken |= chosen[j] == e;
            if (!taken && (best < 0 || l[e] > l[best])) best = e;
        }
        chosen[k] = best;
        pr[k] = exp((double)l[best] - m);
        top += pr[k];
    }
    for (int k = 0; k < topk; k++) {
        idx[t * topk + k] = chosen[k];
        wts[t * topk + k] = (float)(pr[k] / (renorm ? top : sum));
    }
}

// moe_route_w is moe_route with one warp per token: the lanes split the
// experts, and each of the k rounds is a warp argmax (ties to the lower
// expert id, as in moe_route). moe_route's single thread walked all E
// experts k times (~40 us per call for E=128, k=8: 2 ms of a Qwen3-MoE
// decode step). The max is taken in float (exact), the sum in double.
DEV double dshfl_xor(double v, int o) {
    int lo, hi;
    asm("mov.b64 {%0,%1}, %2;" : "=r"(lo), "=r"(hi) : "d"(v));
    lo = __shfl_xor_sync(0xffffffffu, lo, o);
    hi = __shfl_xor_sync(0xffffffffu, hi, o);
    double r;
    asm("mov.b64 %0, {%1,%2};" : "=d"(r) : "r"(lo), "r"(hi));
    return r;
}
// route_warp routes one token with one warp (lane = threadIdx.x & 31): l
// holds its E logits (global or shared memory); writes topk ids and
// weights. moe_route_w and moe_decode.cu's router both call it, so the
// two paths choose the same experts.
DEV void route_warp(const float* l, int E, int topk, int renorm, int* idx, float* wts) {
    const int lane = threadIdx.x & 31;
    float mf = NEG_INF;
    for (int e = lane; e < E; e += 32) mf = fmaxf(mf, l[e]);
    mf = warp_max(mf);
    const double m = (double)mf;
    double sum = 0;
    for (int e = lane; e < E; e += 32) sum += exp((double)l[e] - m);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += dshfl_xor(sum, o);
    u32 taken = 0; // bit i: expert lane + 32i chosen (E <= 1024)
    double top = 0, pr[16];
    int chosen[16];
    for (int k = 0; k < topk; k++) {
        float bv = NEG_INF;
        int be = 0x7fffffff;
        for (int e = lane, i = 0; e < E; e += 32, i++)
            if (!((taken >> i) & 1u) && (be == 0x7fffffff || l[e] > bv)) bv = l[e], be = e;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            int oe = __shfl_xor_sync(0xffffffffu, be, o);
            if (oe != 0x7fffffff && (be == 0x7fffffff || ov > bv || (ov == bv && oe < be))) bv = ov, be = oe;
        }
        if ((be & 31) == lane) taken |= 1u << (be >> 5);
        chosen[k] = be;
        pr[k] = exp((double)bv - m);
        top += pr[k];
    }
    if (lane == 0)
        for (int k = 0; k < topk; k++) {
            idx[k] = chosen[k];
            wts[k] = (float)(pr[k] / (renorm ? top : sum));
        }
}
extern "C" __global__ void moe_route_w(const float* logits, int T, int E, int topk, int renorm, int* idx, float* wts) { grid_dep_start();
    const int t = blockIdx.x;
    route_warp(logits + (long long)t * E, E, topk, renorm, idx + t * topk, wts + t * topk);
}

// moe_sum: dst[t] = sum over slots of wts[t, slot] * y[slot][t] (the
// grouped path's slots in one pass), one block per token row.
extern "C" __global__ void moe_sum(float* dst, const float* y, const float* wts, int T, int topk, int cols) { grid_dep_start();
    const int t = blockIdx.x;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        float acc = 0.f;
        for (int k = 0; k < topk; k++) acc = fmaf(wts[t * topk + k], y[((long long)k * T + t) * cols + c], acc);
        dst[(long long)t * cols + c] = acc;
    }
}

// moe_accum: dst (+)= wts[t, slot] * y, one block per token row.
extern "C" __global__ void moe_accum(float* dst, const float* y, const float* wts, int topk, int slot, int cols, int first) { grid_dep_start();
    float wgt = wts[blockIdx.x * topk + slot];
    long long o = (long long)blockIdx.x * cols;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) dst[o + c] = (first ? 0.f : dst[o + c]) + wgt * y[o + c];
}

// copy_f32x4 is the bandwidth yardstick the GEMV kernels are compared with
// in the benchmarks: a plain 16-byte-per-thread copy.
extern "C" __global__ void copy_f32x4(float4* dst, const float4* src, long long n) { grid_dep_start(); GRID_STRIDE(i, n) dst[i] = src[i]; }
// copy_f32 copies a slot's recurrent state to or from its snapshot place
// (slotstate.go), whose offsets need not be 16-byte aligned.
extern "C" __global__ void copy_f32(float* dst, const float* src, long long n) { grid_dep_start(); GRID_STRIDE(i, n) dst[i] = src[i]; }
