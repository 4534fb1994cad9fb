// Paged attention. The cache of one layer is laid out
// [block][kvHead][slot][headDim] in IEEE f16 (as llama.cpp and vLLM keep
// it): half the bytes of f32 for decode's KV reads and prefill's tile
// loads, 11 significant bits, and K/V of post-norm activations stay far
// inside f16's range. The rows of one head inside a block are contiguous.
// With --kv-cache-dtype fp8 the same layout holds OCP E4M3 codes, one byte
// a value (the _f8 kernels): every kernel below is a template over the
// element (KvF16, KvF8), and the fp8 one widens codes to f16 or f32 where
// it loads them. A step's token positions, token->sequence map and block
// tables come from the step buffers.

// f16x4 widens 4 f16 values (8 bytes, 8-byte aligned) to floats.
DEV float4 f16x4(const u16* p) {
    uint2 u = *reinterpret_cast<const uint2*>(p);
    return f4(f16f((u16)(u.x & 0xffffu)), f16f((u16)(u.x >> 16)), f16f((u16)(u.y & 0xffffu)), f16f((u16)(u.y >> 16)));
}

// e4m3_enc rounds f to the nearest OCP E4M3 ("E4M3FN") code, ties to
// even, saturating at +-448 (infinities included; NaN stays NaN): the
// CPU's tensor.F32ToE4M3 bit for bit, so both backends store the same
// codes. Static scale 1.0, as the CPU store (docs/kv-cache.md, Scales).
DEV u8 e4m3_enc(float f) {
    const u32 u = __float_as_uint(f), s = (u >> 24) & 0x80u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (u8)(s | 0x7fu);
    if (a >= 0x43e00000u) return (u8)(s | 0x7eu); // 448 and up
    if (a < 0x3c800000u) return (u8)(s | (u32)__float2int_rn(__uint_as_float(a) * 512.f)); // subnormal m*2^-9
    u32 c = ((a >> 23) - 120u) << 3 | ((a >> 20) & 7u); // rebias 127 -> 7, keep 3 mantissa bits
    const u32 rem = a & 0xfffffu;
    if (rem > 0x80000u || (rem == 0x80000u && (c & 1u))) c++;
    return (u8)(s | min(c, 0x7eu));
}
// e4m3_h2 widens the two codes in bytes 0 and 1 of x to an f16 pair
// (code 0 low): fp_h16's bit move (the code's value times 2^-8, subnormals
// included) in each 16-bit half, then an exact f16 multiply by 256. (NaN
// codes, which the encoder writes only for NaN input, widen to 480.)
DEV u32 e4m3_h2(u32 x) {
    const u32 u = __byte_perm(x, 0u, 0x4140u), h = ((u & 0x00800080u) << 8) | ((u & 0x007f007fu) << 7);
    u32 r;
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(h), "r"(0x5c005c00u));
    return r;
}
DEV float e4m3f(u8 c) { return f16f((u16)fp_h16(c, 8)) * 256.f; }

// KV element types: T the stored element; ld4/ld2/ld1 widen 4 (aligned
// to 4 elements), 2 or 1 of them (attn_decode keeps its own f16 pair
// loads, both issued before either is widened); enc rounds a value for the store; rnd
// is what a value reads back as (the f16 kernels keep the step's own key
// and value unrounded in registers, as before; the fp8 ones use the code's
// value, as later steps and the CPU store read it).
struct KvF16 {
    typedef u16 T;
    static constexpr bool F8 = false;
    static DEV float4 ld4(const u16* p) { return f16x4(p); }
    static DEV float ld1(const u16* p) { return f16f(*p); }
    static DEV u16 enc(float f) { return f16bits(f); }
    static DEV float rnd(float f) { return f; }
};
struct KvF8 {
    typedef u8 T;
    static constexpr bool F8 = true;
    static DEV float4 ld4(const u8* p) {
        const u32 a = *reinterpret_cast<const u32*>(p), lo = e4m3_h2(a), hi = e4m3_h2(a >> 16);
        return f4(f16f((u16)(lo & 0xffffu)), f16f((u16)(lo >> 16)), f16f((u16)(hi & 0xffffu)), f16f((u16)(hi >> 16)));
    }
    static DEV float2 ld2(const u8* p) {
        const u32 h = e4m3_h2(*reinterpret_cast<const u16*>(p));
        return float2{f16f((u16)(h & 0xffffu)), f16f((u16)(h >> 16))};
    }
    static DEV float ld1(const u8* p) { return e4m3f(*p); }
    static DEV u8 enc(float f) { return e4m3_enc(f); }
    static DEV float rnd(float f) { return e4m3f(e4m3_enc(f)); }
};

// kv_store writes this step's k and v rows (f32) into their slots (f16 or
// E4M3 codes). One block per token.
template <class KV>
DEV void kv_store_impl(typename KV::T* Kc, typename KV::T* Vc, const float* k, const float* v, const int* pos,
                       const int* tok2seq, const int* btab, int btStride, int bs, int kvh, int hd) {
    int t = blockIdx.x, p = pos[t];
    long long blk = btab[(long long)tok2seq[t] * btStride + p / bs];
    int w = kvh * hd;
    for (int i = threadIdx.x; i < w; i += blockDim.x) {
        int h = i / hd, d = i - h * hd;
        long long dst = ((blk * kvh + h) * bs + p % bs) * hd + d;
        Kc[dst] = KV::enc(k[(long long)t * w + i]);
        Vc[dst] = KV::enc(v[(long long)t * w + i]);
    }
}
#define KV_STORE(SFX, KV)                                                                                            \
    extern "C" __global__ void kv_store##SFX(KV::T* Kc, KV::T* Vc, const float* k, const float* v, const int* pos, \
                                             const int* tok2seq, const int* btab, int btStride, int bs, int kvh,     \
                                             int hd) {                                                                \
        grid_dep_start();                                                                                             \
        kv_store_impl<KV>(Kc, Vc, k, v, pos, tok2seq, btab, btStride, bs, kvh, hd);                                  \
    }
KV_STORE(, KvF16) KV_STORE(_f8, KvF8)

#define ATT_THREADS 128
#define ATT_MAXD 512 // largest head dim: 4 output dims per thread


// sink_sum adds an attention sink's softmax column (gpt-oss: a per-head
// logit, AttnParams.Sinks) to the row sum L of scores whose max is M; sink
// null: none. The sink only enlarges the denominator, so this is all it
// changes (M = -inf, no key at all, makes the output 0).
DEV float sink_sum(float L, float M, const float* sink) { return sink ? L + expf(*sink - M) : L; }

// merge_splits combines the S partial results (max, sum, unnormalised o)
// of one (token, head) in part into out (hd floats), with the threads
// [tid0, tid0+nthr) of the block; sink: the head's sink (or null).
// Partials were written by other blocks of this launch: ld.cg reads them
// past L1.
DEV void merge_splits(float* out, const float* pb, int S, int hd, int tid0, int nthr, const float* sink) {
    float M = NEG_INF;
    for (int s = 0; s < S; s++) M = fmaxf(M, ldcg(pb + s * (hd + 2)));
    float L = 0.f;
    for (int s = 0; s < S; s++) {
        float ms = ldcg(pb + s * (hd + 2));
        if (ms > NEG_INF) L += ldcg(pb + s * (hd + 2) + 1) * expf(ms - M);
    }
    L = sink_sum(L, M, sink);
    float inv = L > 0.f ? 1.f / L : 0.f;
    for (int d = tid0; d < hd; d += nthr) {
        float acc = 0.f;
        for (int s = 0; s < S; s++) {
            float ms = ldcg(pb + s * (hd + 2));
            if (ms > NEG_INF) acc += ldcg(pb + s * (hd + 2) + 2 + d) * expf(ms - M);
        }
        out[d] = acc * inv;
    }
}

// attention (generic): grid (heads, tokens, splits), ATT_THREADS threads,
// any head dim up to 512, reading only the cache (kv_store ran first).
// Each block covers one split of one (token, head)'s causal range
// [first, pos]: the score phase gives one key per thread (the dot product
// over the head dim in registers), an online softmax runs over chunks of
// ATT_THREADS keys, and the PV phase gives each thread up to 4 output dims
// with the chunk's probabilities in shared memory. The split count is
// fixed by the launch (not by the context length), so decode steps keep
// one graph as the context grows: each split takes ceil(n/splits) of the
// n keys. With splits > 1 the block writes (max, sum, unnormalised o) to
// part, and the last split block of each (token, head) merges them (cnt:
// zeroed counters, one per (token, head)). sinks: [heads] sink logits or
// null. Decode steps of head dims 64 and 128 use attn_decode below instead.
template <class KV>
DEV void attention_impl(float* out, float* part, const float* q, const typename KV::T* Kc, const typename KV::T* Vc,
                        const int* pos, const int* tok2seq, const int* btab, int btStride, int bs, int heads, int kvh,
                        int hd, float scale, int window, float softcap, int* cnt, const float* sinks) {
    __shared__ float qs[ATT_MAXD];
    __shared__ float ps[ATT_THREADS];
    __shared__ long long voff[ATT_THREADS];
    __shared__ float red[32];
    const int h = blockIdx.x, t = blockIdx.y, split = blockIdx.z, S = gridDim.z, tid = threadIdx.x;
    const int p = pos[t];
    const int first = window > 0 ? max(0, p - window + 1) : 0;
    const int n = p - first + 1;
    const int per = (n + S - 1) / S;
    const int j0 = first + split * per, j1 = min(j0 + per, p + 1);
    const int kh = h / (heads / kvh);
    const int* bt = btab + (long long)tok2seq[t] * btStride;
    for (int d = tid; d < hd; d += ATT_THREADS) qs[d] = q[((long long)t * heads + h) * hd + d];
    __syncthreads();

    float m = NEG_INF, l = 0.f, o[4] = {0.f, 0.f, 0.f, 0.f};
    const bool vec = (hd & 3) == 0;
    const int dq = hd >> 2, G = vec ? ATT_THREADS / dq : 0, g = vec ? tid / dq : 0, li = vec ? tid % dq : 0;
    float4 o4 = f4(0.f, 0.f, 0.f, 0.f);
    for (int c = j0; c < j1; c += ATT_THREADS) {
        int j = c + tid;
        float s = NEG_INF;
        if (j < j1) {
            long long blk = bt[j / bs];
            long long off = ((blk * kvh + kh) * bs + j % bs) * hd;
            voff[tid] = off;
            const typename KV::T* kp = Kc + off;
            float dot = 0.f;
            if (vec) {
#pragma unroll 8
                for (int d = 0; d < hd; d += 4) {
                    float4 kv = KV::ld4(kp + d);
                    dot = fmaf(qs[d], kv.x, dot);
                    dot = fmaf(qs[d + 1], kv.y, dot);
                    dot = fmaf(qs[d + 2], kv.z, dot);
                    dot = fmaf(qs[d + 3], kv.w, dot);
                }
            } else {
                for (int d = 0; d < hd; d++) dot = fmaf(qs[d], KV::ld1(kp + d), dot);
            }
            s = dot * scale;
            if (softcap > 0.f) s = softcap * tanhf(s / softcap);
        }
        float mnew = fmaxf(m, block_max(s, red));
        float corr = m == NEG_INF ? 0.f : expf(m - mnew); // nothing to rescale on the first chunk
        float pj = j < j1 ? expf(s - mnew) : 0.f;
        ps[tid] = pj;
        l = l * corr + block_sum(pj, red); // block_sum's barriers also publish ps and voff
        int nk = min(ATT_THREADS, j1 - c);
        if (vec) {
            // PV by 4-dim columns: G groups of dq threads, group g taking
            // keys g, g+G, ... of the chunk.
            if (g < G) {
                float4 acc = f4(o4.x * corr, o4.y * corr, o4.z * corr, o4.w * corr);
#pragma unroll 4
                for (int i = g; i < nk; i += G) {
                    float4 vv = KV::ld4(Vc + voff[i] + 4 * li);
                    float pi = ps[i];
                    acc.x = fmaf(pi, vv.x, acc.x); acc.y = fmaf(pi, vv.y, acc.y);
                    acc.z = fmaf(pi, vv.z, acc.z); acc.w = fmaf(pi, vv.w, acc.w);
                }
                o4 = acc;
            }
        } else {
#pragma unroll
            for (int k = 0; k < 4; k++) {
                int d = tid + k * ATT_THREADS;
                if (d < hd) {
                    float acc = o[k] * corr;
#pragma unroll 8
                    for (int i = 0; i < nk; i++) acc = fmaf(ps[i], KV::ld1(Vc + voff[i] + d), acc);
                    o[k] = acc;
                }
            }
        }
        m = mnew;
        __syncthreads(); // ps and voff are rewritten by the next chunk
    }
    if (vec) {
        // Sum the G groups' partial outputs into o[] (thread d holds dims
        // d, d+128, ... as in the scalar path).
        __shared__ float4 red4[ATT_THREADS];
        red4[tid] = o4;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < 4; k++) {
            int d = tid + k * ATT_THREADS;
            if (d < hd) {
                float s = 0.f;
                for (int gg = 0; gg < G; gg++) {
                    float4 p = red4[gg * dq + d / 4];
                    int r = d & 3;
                    s += r == 0 ? p.x : r == 1 ? p.y : r == 2 ? p.z : p.w;
                }
                o[k] = s;
            }
        }
    }
    float* orow = out + ((long long)t * heads + h) * hd;
    const float* sink = sinks ? sinks + h : nullptr;
    if (S == 1) {
        l = sink_sum(l, m, sink);
        float inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            int d = tid + k * ATT_THREADS;
            if (d < hd) orow[d] = o[k] * inv;
        }
        return;
    }
    float* pb = part + ((long long)t * heads + h) * S * (hd + 2);
    float* pp = pb + split * (hd + 2);
    if (tid == 0) { pp[0] = m; pp[1] = l; }
#pragma unroll
    for (int k = 0; k < 4; k++) {
        int d = tid + k * ATT_THREADS;
        if (d < hd) pp[2 + d] = o[k];
    }
    if (last_block(cnt + (long long)t * heads + h, S)) merge_splits(orow, pb, S, hd, tid, ATT_THREADS, sink);
}
#define ATTENTION(SFX, KV)                                                                                        \
    extern "C" __global__ void __launch_bounds__(ATT_THREADS)                                                     \
        attention##SFX(float* out, float* part, const float* q, const KV::T* Kc, const KV::T* Vc, const int* pos, \
                       const int* tok2seq, const int* btab, int btStride, int bs, int heads, int kvh, int hd,      \
                       float scale, int window, float softcap, int* cnt, const float* sinks) {                    \
        grid_dep_start();                                                                                         \
        attention_impl<KV>(out, part, q, Kc, Vc, pos, tok2seq, btab, btStride, bs, heads, kvh, hd, scale, window, \
                           softcap, cnt, sinks);                                                                  \
    }
ATTENTION(, KvF16) ATTENTION(_f8, KvF8)
//kernels:part

// attn_decode: decode steps (one query token per sequence) for head dims
// 64 and 128 with up to 8 query heads per kv head. Grid (kvHeads, tokens,
// splits), 4 warps. One block serves all G query heads of its kv head, so
// each K/V row is read once for the group (GQA), and a warp takes whole
// keys: lane l holds dims [l*HD/32, (l+1)*HD/32) of each row, the G dot
// products are warp reductions, and the online softmax state sits in
// registers, so the key loop has no block barriers (the generic kernel's
// per-chunk block reductions made a decode call ~15-20 us at 200 keys).
// DU keys per warp iteration keep 2*DU row loads in flight. The step's own
// key and value are read from k/v rows (kin, vin: f32, row stride ldk),
// and warp 0 of split 0 stores them into the cache, so no kv_store launch
// runs and nothing in the launch reads a slot being written. The 4 warps
// merge through shared memory; with splits, the last block of each (token,
// kv head) merges the splits (cnt: zeroed counters, one per (token, kv
// head), left zero again).
// RoPE inside attn_decode (rotate_half layout, as the rope kernels in
// misc.cu, the angle in double): a lane holds VPL consecutive dims, so a
// dim's partner (d +- half) sits half/VPL lanes away; the Go side fuses
// only when half is a multiple of VPL. rope_angles gives this lane's
// scaled cos/sin (ok false: the lane's dims are past the rotary part).
template <int VPL>
DEV bool rope_angles(float (&cs)[VPL], float (&sn)[VPL], const float* invf, int half, float rscale, int p, int lane) {
    const int hl = half / VPL;
    if (lane >= 2 * hl) return false;
#pragma unroll
    for (int i = 0; i < VPL; i++) {
        const int d = lane * VPL + i, fi = d < half ? d : d - half;
        double sd, cd;
        sincos((double)p * (double)invf[fi], &sd, &cd);
        cs[i] = (float)cd * rscale, sn[i] = (float)sd * rscale;
    }
    return true;
}
// rope_apply rotates one head row held VPL dims per lane (all 32 lanes
// call it: the partner values come by shuffle).
template <int VPL>
DEV void rope_apply(float (&v)[VPL], const float (&cs)[VPL], const float (&sn)[VPL], bool ok, int half, int lane) {
    const int hl = half / VPL;
    const int partner = ok ? (lane < hl ? lane + hl : lane - hl) : lane;
    float o[VPL];
#pragma unroll
    for (int i = 0; i < VPL; i++) o[i] = __shfl_sync(0xffffffffu, v[i], partner);
    if (!ok) return;
#pragma unroll
    for (int i = 0; i < VPL; i++) v[i] = lane < hl ? v[i] * cs[i] - o[i] * sn[i] : v[i] * cs[i] + o[i] * sn[i];
}

// head_norm is the per-head RMSNorm (Qwen3's q_norm/k_norm) of a head row
// held VPL dims per lane: (v*inv)*w, as the rmsnorm kernel rounds it.
// The weights w are this lane's VPL, loaded before the wait (constants).
template <int VPL>
DEV void head_norm(float (&v)[VPL], const float (&w)[VPL], float eps) {
    float ss = 0.f;
#pragma unroll
    for (int i = 0; i < VPL; i++) ss += v[i] * v[i];
    const float inv = 1.f / sqrtf(warp_sum(ss) / (float)(32 * VPL) + eps);
#pragma unroll
    for (int i = 0; i < VPL; i++) v[i] = v[i] * inv * w[i];
}

#define AD_G 8  // most query heads per kv head
#define AD_DU 4 // keys per warp iteration
#define AD_MAXS 64 // most splits (the Go side caps them)
#define AD_ML 8 // partial loads in flight per thread while merging
// merge_head_splits merges the S split partials of each of G heads into
// outputs e0..e1-1 of the G*HD at out (head g's row at out + g*HD):
// ml(g, s) gives split s's (max, sum) of head g, po(g, d, s) its output d.
// The (max, sum) pairs go through shared memory once; then each output is
// a weighted sum over the splits, its loads issued AD_ML at a time before
// any is used (v1 walked them one dependent ld.cg at a time: ~20 us a call
// at 33 splits). sk: the G heads' sinks (or null). Every thread of the
// block calls it.
template <int HD, int GM, class ML, class PO>
DEV void merge_head_splits(float* out, int G, int S, int e0, int e1, const float* sk, ML ml, PO po) {
    __shared__ float sw[GM][AD_MAXS], sl[GM][AD_MAXS], sinv[GM];
    for (int i = threadIdx.x; i < G * S; i += 128) {
        const int g = i / S, s = i - g * S;
        const float2 v = ml(g, s);
        sw[g][s] = v.x, sl[g][s] = v.y;
    }
    __syncthreads();
    if (threadIdx.x < G) {
        const int g = threadIdx.x;
        float M = NEG_INF, L = 0.f;
        for (int s = 0; s < S; s++) M = fmaxf(M, sw[g][s]);
        for (int s = 0; s < S; s++) {
            const float f = sw[g][s] == NEG_INF ? 0.f : expf(sw[g][s] - M);
            sw[g][s] = f;
            L += f * sl[g][s];
        }
        L = sink_sum(L, M, sk ? sk + g : nullptr);
        sinv[g] = L > 0.f ? 1.f / L : 0.f;
    }
    __syncthreads();
    for (int e = e0 + threadIdx.x; e < e1; e += 128) {
        const int g = e / HD, d = e - g * HD;
        float acc = 0.f;
        for (int s0 = 0; s0 < S; s0 += AD_ML) {
            float v[AD_ML];
#pragma unroll
            for (int u = 0; u < AD_ML; u++) v[u] = s0 + u < S ? po(g, d, s0 + u) : 0.f;
#pragma unroll
            for (int u = 0; u < AD_ML; u++)
                if (s0 + u < S) acc = fmaf(sw[g][s0 + u], v[u], acc);
        }
        out[(long long)g * HD + d] = acc * sinv[g];
    }
}

// GM: the most query heads a block serves (AD_G, or 1 for the one-head
// blocks of short contexts: a quarter of the registers for q, the sums and
// the softmax state). wb: write the rotated/normalised q and k back (the
// unfused kernels' result); 0 when the caller reads neither afterwards
// (AttnParams.ScratchQK), which also drops the k write-back's ticket.
// CL (the _c kernels, used on sm_90 when wb is 0): the S split blocks
// of a head group are one thread block cluster (the Go side launches them
// with cluster dims (1, 1, S)); each keeps its partial (max, sum, o) in
// shared memory, and after a cluster barrier every block merges a slice of
// the outputs, reading the others' partials through distributed shared
// memory: no partials through L2, no fence and ticket, no last block. The
// sums are the ticket path's, term for term (rank = split).
// sinks: [heads] sink logits (or null), added to each head's softmax sum
// where the sums are final. SH (the _s kernels, head dims 256 and 512):
// a KV-shared layer's call, which stores nothing and has no k or v rows
// (kin, vin null): the step's key is in the cache already, written by the
// owning layer's call earlier in the step, so every key is read from the
// cache and only after the wait (a load before it could race that store).
// (At head dims 64 and 128 such calls take the generic kernel.)
template <int HD, int GM = AD_G, bool CL = false, class KV = KvF16, bool SH = false>
DEV void attn_decode_impl(float* out, float* part, float* q, typename KV::T* Kc, typename KV::T* Vc, const int* pos, const int* tok2seq,
                          const int* btab, int btStride, int bs, int heads, int kvh, float scale, int window,
                          float softcap, float* kin, const float* vin, int ldk, int* cnt, const float* invf, int half,
                          float rscale, const float* qn, const float* kn, float neps, int gl, int wb,
                          const float* sinks) {
    constexpr int VPL = HD / 32; // dims per lane: 2, 4, 8 or 16
    // Keys a warp iteration: at HD 512 one, its K and V rows 2 KB a warp in
    // flight as HD 128's four (2 held 203-255 registers, 4 bytes spilled
    // in _h2c_f8; 4 would hold 128 registers of K/V alone).
    constexpr int DU = HD >= 512 ? 1 : AD_DU;
    __shared__ float wm[4][GM], wl[4][GM];
    __shared__ float wo[4][GM][HD];
    __shared__ float cm[CL ? GM : 1], cs[CL ? GM : 1], co[CL ? GM : 1][CL ? HD : 1]; // CL: this split's partials
    // Head groups: blockIdx.x is (kv head, group of gl of its query heads),
    // so a large GQA group (Qwen3-30B-A3B: 8 per kv head) spreads over
    // more blocks, each with a shorter head loop.
    const int NG = heads / kvh / gl, kh = blockIdx.x / NG, hgi = blockIdx.x % NG;
    const int t = blockIdx.y, split = blockIdx.z, S = gridDim.z;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int G = gl, h0 = kh * (heads / kvh) + hgi * gl; // this block's query heads: h0 .. h0+G-1
    const int p = pos[t];
    const int first = window > 0 ? max(0, p - window + 1) : 0;
    const int n = p - first + 1;
    const int per = (n + S - 1) / S;
    const int j0 = first + split * per, j1 = min(j0 + per, p + 1);
    const int* bt = btab + (long long)tok2seq[t] * btStride;
    float* krow = kin + (long long)t * ldk + kh * HD + lane * VPL;
    const float* vself = vin + (long long)t * ldk + kh * HD + lane * VPL;
    // The cached keys before p were written by earlier steps (each step
    // ends in a host sync), and the positions and block tables are step
    // inputs: the first round of K/V loads is issued before waiting for
    // the q/k/v projection (PDL), so it overlaps that kernel's tail.
    float kr[DU][VPL], vr[DU][VPL];
    int c = j0 + warp * DU;
    auto load_into = [&](int c0, float (&kd)[DU][VPL], float (&vd)[DU][VPL]) {
#pragma unroll
        for (int u = 0; u < DU; u++) {
            const int j = c0 + u;
            if (j < j1 && (SH || j != p)) {
                long long off = ((bt[j / bs] * (long long)kvh + kh) * bs + j % bs) * HD + lane * VPL;
                if constexpr (VPL >= 8) { // HD 256/512: VPL/4 loads of 4 dims each
#pragma unroll
                    for (int c4 = 0; c4 < VPL / 4; c4++) {
                        float4 a = KV::ld4(Kc + off + 4 * c4), b = KV::ld4(Vc + off + 4 * c4);
                        kd[u][4 * c4] = a.x, kd[u][4 * c4 + 1] = a.y, kd[u][4 * c4 + 2] = a.z, kd[u][4 * c4 + 3] = a.w;
                        vd[u][4 * c4] = b.x, vd[u][4 * c4 + 1] = b.y, vd[u][4 * c4 + 2] = b.z, vd[u][4 * c4 + 3] = b.w;
                    }
                } else if (VPL == 4) {
                    float4 a = KV::ld4(Kc + off), b = KV::ld4(Vc + off);
                    kd[u][0] = a.x, kd[u][1] = a.y, kd[u][2] = a.z, kd[u][3] = a.w;
                    vd[u][0] = b.x, vd[u][1] = b.y, vd[u][2] = b.z, vd[u][3] = b.w;
                } else if constexpr (KV::F8) {
                    float2 a = KV::ld2(Kc + off), b = KV::ld2(Vc + off);
                    kd[u][0] = a.x, kd[u][1] = a.y;
                    vd[u][0] = b.x, vd[u][1] = b.y;
                } else { // (both loads issued before either is widened)
                    u32 a = *reinterpret_cast<const u32*>(Kc + off), b = *reinterpret_cast<const u32*>(Vc + off);
                    kd[u][0] = f16f((u16)(a & 0xffffu)), kd[u][1] = f16f((u16)(a >> 16));
                    vd[u][0] = f16f((u16)(b & 0xffffu)), vd[u][1] = f16f((u16)(b >> 16));
                }
            } else {
#pragma unroll
                for (int i = 0; i < VPL; i++) kd[u][i] = vd[u][i] = 0.f;
            }
        }
    };
    auto load_keys = [&](int c0) { load_into(c0, kr, vr); };
    if constexpr (!SH) load_keys(c);
    // With invf (RoPE fused, the rope2 launch dropped), q and this step's
    // k are rotated here, and with qn/kn normalised first (the q_norm and
    // k_norm launches dropped); the last block writes both back, as those
    // kernels would have left them.
    float rc[VPL], rs[VPL];
    const bool rok = invf ? rope_angles<VPL>(rc, rs, invf, half, rscale, p, lane) : false;
    float qw[VPL], kw[VPL];
#pragma unroll
    for (int i = 0; i < VPL; i++) qw[i] = qn ? qn[lane * VPL + i] : 0.f, kw[i] = kn ? kn[lane * VPL + i] : 0.f;
    grid_dep_wait();
    float kself[VPL];
    if constexpr (SH) {
        load_keys(c);
#pragma unroll
        for (int i = 0; i < VPL; i++) kself[i] = 0.f;
    } else {
#pragma unroll
        for (int i = 0; i < VPL; i++) kself[i] = krow[i];
        if (kn) head_norm<VPL>(kself, kw, neps);
        if (invf) rope_apply<VPL>(kself, rc, rs, rok, half, lane);
    }
    if (!SH && split == 0 && hgi == 0 && warp == 0) {
        long long dst = ((bt[p / bs] * (long long)kvh + kh) * bs + p % bs) * HD + lane * VPL;
#pragma unroll
        for (int i = 0; i < VPL; i++) Kc[dst + i] = KV::enc(kself[i]), Vc[dst + i] = KV::enc(vself[i]);
    }
    float qv[GM][VPL];
#pragma unroll
    for (int g = 0; g < GM; g++) {
#pragma unroll
        for (int i = 0; i < VPL; i++) qv[g][i] = g < G ? q[((long long)t * heads + h0 + g) * HD + lane * VPL + i] : 0.f;
        if (qn && g < G) head_norm<VPL>(qv[g], qw, neps);
        if (invf && g < G) rope_apply<VPL>(qv[g], rc, rs, rok, half, lane);
    }
    float m[GM], l[GM], acc[GM][VPL];
#pragma unroll
    for (int g = 0; g < GM; g++) {
        m[g] = NEG_INF, l[g] = 0.f;
#pragma unroll
        for (int i = 0; i < VPL; i++) acc[g][i] = 0.f;
    }
    for (; c < j1; c += 4 * DU) {
        if (c > j0 + warp * DU) load_keys(c);
#pragma unroll
        for (int u = 0; u < DU; u++)
            if (!SH && c + u == p)
#pragma unroll
                for (int i = 0; i < VPL; i++) kr[u][i] = KV::rnd(kself[i]), vr[u][i] = KV::rnd(vself[i]);
#pragma unroll
        for (int g = 0; g < GM; g++) {
            if (g >= G) break;
            float s[DU];
#pragma unroll
            for (int u = 0; u < DU; u++) {
                float d = 0.f;
#pragma unroll
                for (int i = 0; i < VPL; i++) d = fmaf(qv[g][i], kr[u][i], d);
                // scale on the score, not on q: qv stays the rotated q the
                // last block writes back from registers
                s[u] = warp_sum(d) * scale;
                if (softcap > 0.f) s[u] = softcap * tanhf(s[u] / softcap);
                if (c + u >= j1) s[u] = NEG_INF;
            }
            float mn = m[g];
#pragma unroll
            for (int u = 0; u < DU; u++) mn = fmaxf(mn, s[u]);
            const float corr = m[g] == NEG_INF ? 0.f : expf(m[g] - mn);
            l[g] *= corr;
#pragma unroll
            for (int i = 0; i < VPL; i++) acc[g][i] *= corr;
#pragma unroll
            for (int u = 0; u < DU; u++) {
                const float pu = s[u] == NEG_INF ? 0.f : expf(s[u] - mn);
                l[g] += pu;
#pragma unroll
                for (int i = 0; i < VPL; i++) acc[g][i] = fmaf(pu, vr[u][i], acc[g][i]);
            }
            m[g] = mn;
        }
    }
    // Merge the 4 warps.
#pragma unroll
    for (int g = 0; g < GM; g++) {
        if (g >= G) break;
        if (lane == 0) wm[warp][g] = m[g], wl[warp][g] = l[g];
#pragma unroll
        for (int i = 0; i < VPL; i++) wo[warp][g][lane * VPL + i] = acc[g][i];
    }
    __syncthreads();
    float* pb0 = part + ((long long)t * heads + h0) * S * (HD + 2);
    for (int e = threadIdx.x; e < G * HD; e += 128) {
        const int g = e / HD, d = e - g * HD;
        float M = NEG_INF;
#pragma unroll
        for (int w = 0; w < 4; w++) M = fmaxf(M, wm[w][g]);
        float L = 0.f, o = 0.f;
#pragma unroll
        for (int w = 0; w < 4; w++) {
            const float f = wm[w][g] == NEG_INF ? 0.f : expf(wm[w][g] - M);
            L += wl[w][g] * f;
            o += wo[w][g][d] * f;
        }
        if (S == 1) {
            L = sink_sum(L, M, sinks ? sinks + h0 + g : nullptr);
            out[((long long)t * heads + h0 + g) * HD + d] = L > 0.f ? o / L : 0.f;
        } else if constexpr (CL) {
            co[g][d] = o;
            if (d == 0) cm[g] = M, cs[g] = L;
        } else {
            float* pp = pb0 + ((long long)g * S + split) * (HD + 2);
            if (d == 0) pp[0] = M, pp[1] = L;
            pp[2 + d] = o;
        }
    }
    if constexpr (CL) {
        if (S > 1) { // (the Go side never clusters one split)
            cluster_sync(); // every split's partials are in its shared memory
            const int chunk = (G * HD + S - 1) / S, e0 = (int)cluster_rank() * chunk;
            merge_head_splits<HD, GM>(out + ((long long)t * heads + h0) * HD, G, S, e0, min(e0 + chunk, G * HD),
                                      sinks ? sinks + h0 : nullptr,
                                      [&](int g, int s) { return float2{ld_cluster(&cm[g], s), ld_cluster(&cs[g], s)}; },
                                      [&](int g, int d, int s) { return ld_cluster(&co[g][d], s); });
            cluster_sync(); // no block leaves (and frees its partials) while another reads them
        }
        return;
    }
    // Counters: one per (token, head group) for the splits, then one per
    // (token, kv head) for the groups.
    if (S > 1 && !last_block(cnt + (long long)t * gridDim.x + blockIdx.x, S)) return;
    if (wb && (invf || qn || kn)) {
        // Every block of this head group has read its q rows (this is the
        // last, or the only one): write them back rotated, from registers
        // (v2 reloaded and re-rotated each head: G dependent round trips).
        if (warp == 0)
#pragma unroll
            for (int g = 0; g < GM; g++) {
                if (g >= G) break;
                float* qr = q + ((long long)t * heads + h0 + g) * HD + lane * VPL;
#pragma unroll
                for (int i = 0; i < VPL; i++) qr[i] = qv[g][i];
            }
        // k is read by every group's blocks: the last group writes it.
        if (!SH && (invf || kn) && (NG == 1 || last_block(cnt + (long long)gridDim.y * gridDim.x + t * kvh + kh, NG)) && warp == 0)
#pragma unroll
            for (int i = 0; i < VPL; i++) krow[i] = kself[i];
    }
    if (S == 1) return;
    // Last split block: merge the S partials of each of the G heads.
    merge_head_splits<HD, GM>(out + ((long long)t * heads + h0) * HD, G, S, 0, G * HD, sinks ? sinks + h0 : nullptr,
                              [&](int g, int s) {
                                  const float* pp = pb0 + ((long long)g * S + s) * (HD + 2);
                                  return float2{ldcg(pp), ldcg(pp + 1)};
                              },
                              [&](int g, int d, int s) { return ldcg(pb0 + ((long long)g * S + s) * (HD + 2) + 2 + d); });
}
#define AD_PARAMS(KV)                                                                                              \
    float *out, float *part, float *q, KV::T *Kc, KV::T *Vc, const int *pos, const int *tok2seq, const int *btab,     \
        int btStride, int bs, int heads, int kvh, float scale, int window, float softcap, float *kin, const float *vin, \
        int ldk, int *cnt, const float *invf, int half, float rscale, const float *qn, const float *kn, float neps,   \
        int gl, int wb, const float *sinks
#define AD_ARGS                                                                                                     \
    out, part, q, Kc, Vc, pos, tok2seq, btab, btStride, bs, heads, kvh, scale, window, softcap, kin, vin, ldk, cnt, \
        invf, half, rscale, qn, kn, neps, gl, wb, sinks
// attn_decode_<hd>: up to AD_G heads a block; _h1: one query head a block (head groups of 1); _h2,
// _h4: blocks of 2 or 4 heads (Llama's whole GQA group at long contexts
// and in batched steps, on fewer registers); _h1c, _h2c, _h4c: those with
// the splits merged through a thread block cluster (CL). SFX _f8: the
// same over an E4M3 cache (KV KvF8).
#define AD_KERNEL(HD, NAME, GM, CL, SFX, KV, LB)                                                                       \
    extern "C" __global__ void __launch_bounds__ LB attn_decode_##HD##NAME##SFX(AD_PARAMS(KV)) {                    \
        grid_dep_launch();                                                                                             \
        attn_decode_impl<HD, GM, CL, KV>(AD_ARGS);                                                                     \
    }
// LB4: the launch bounds of the 4-head kernels; (128, 4) holds the fp8 ones to
// the f16 ones' 4 blocks an SM (their widening took them past 128 registers).
#define ATTN_DECODE(HD, SFX, KV, LB4)                                                                                  \
    AD_KERNEL(HD, , AD_G, false, SFX, KV, (128)) AD_KERNEL(HD, _h1, 1, false, SFX, KV, (128))                         \
    AD_KERNEL(HD, _h2, 2, false, SFX, KV, (128)) AD_KERNEL(HD, _h4, 4, false, SFX, KV, LB4)                           \
    AD_KERNEL(HD, _h1c, 1, true, SFX, KV, (128)) AD_KERNEL(HD, _h2c, 2, true, SFX, KV, (128))                         \
    AD_KERNEL(HD, _h4c, 4, true, SFX, KV, LB4)
ATTN_DECODE(64, , KvF16, (128))
//kernels:part
ATTN_DECODE(128, , KvF16, (128))
//kernels:part
ATTN_DECODE(64, _f8, KvF8, (128, 4))
//kernels:part
ATTN_DECODE(128, _f8, KvF8, (128, 4))
//kernels:part
// Head dims 256 and 512 (Gemma 3/4, Qwen3.5): only the small blocks, whose
// q rows and partial outputs fit the registers (plan.DecodeAttention caps
// a block's heads at 4 for 256 and 2 for 512; the general kernel's 8
// heads would hold 128-256 registers of them, and its warp partials at
// 512 pass the 48 KB of static shared memory).
// _h<g>s: KV-shared layers' calls (SH), merged by the ticket.
#define AD_KERNEL_SH(HD, NAME, GM, SFX, KV)                                                                            \
    extern "C" __global__ void __launch_bounds__(128, 3) attn_decode_##HD##NAME##SFX(AD_PARAMS(KV)) {               \
        grid_dep_launch();                                                                                             \
        attn_decode_impl<HD, GM, false, KV, true>(AD_ARGS);                                                            \
    }
#define ATTN_DECODE_WIDE(HD, SFX, KV)                                                                                  \
    AD_KERNEL(HD, _h1, 1, false, SFX, KV, (128)) AD_KERNEL(HD, _h2, 2, false, SFX, KV, (128))                         \
    AD_KERNEL(HD, _h1c, 1, true, SFX, KV, (128)) AD_KERNEL(HD, _h2c, 2, true, SFX, KV, (128))                         \
    AD_KERNEL_SH(HD, _h1s, 1, SFX, KV) AD_KERNEL_SH(HD, _h2s, 2, SFX, KV)
ATTN_DECODE_WIDE(256, , KvF16)
//kernels:part
ATTN_DECODE_WIDE(512, , KvF16)
//kernels:part
ATTN_DECODE_WIDE(256, _f8, KvF8)
//kernels:part
ATTN_DECODE_WIDE(512, _f8, KvF8)
//kernels:part
AD_KERNEL(256, _h4, 4, false, , KvF16, (128)) AD_KERNEL(256, _h4c, 4, true, , KvF16, (128)) AD_KERNEL_SH(256, _h4s, 4, , KvF16)
//kernels:part
AD_KERNEL(256, _h4, 4, false, _f8, KvF8, (128)) AD_KERNEL(256, _h4c, 4, true, _f8, KvF8, (128)) AD_KERNEL_SH(256, _h4s, 4, _f8, KvF8)
