// Flash attention for prefill on the tensor cores (mma.m16n8k16, f16
// operands, f32 accumulation), after kv_store has written the step's keys
// and values into the paged cache.
//
// The per-(token, head) kernel in attention.cu re-reads a query's whole
// context from L2 for every query: at 2048 tokens that is ~64 GB of L2
// traffic per layer and the 2048-token prefill was attention-bound
// (4499 tok/s). Here a block takes 64 consecutive query rows of one
// sequence and one head (16 per warp), walks the keys in tiles of 64 that
// all four warps share through shared memory (K row-major, V transposed,
// both converted to f16 once per tile), and keeps S = QK^T, the online
// softmax and O = PV in registers: memory stays linear in the prompt and
// K/V are read once per 64 queries.
//
// Fragment layout as in mma.cu. S's C fragments of two adjacent key
// 8-tiles are exactly P's A fragment for one 16-key step of PV (the usual
// FlashAttention-2 register reuse), so P never touches shared memory.
// Softmax runs in base 2: Q is pre-multiplied by scale*log2(e) (by scale
// alone with a softcap, which is applied to the natural-unit score).
//
// Limits: head dims 64 and 128 (register budget); others use the generic
// kernel. K, V and Q must fit f16 (|x| < 65504), true of post-norm
// activations; f16 keeps 11 bits where bf16 would keep 8.

#define FA_KT 64
#define FA_LB 8 // K and V float4 loads in flight per thread while a tile loads
#define LOG2E 1.4426950408889634f

DEV float2 f2(float a, float b) {
    float2 r;
    r.x = a, r.y = b;
    return r;
}

template <int HD>
DEV void flash_impl(float* out, const float* q, const float* Kc, const float* Vc, const int* pos, const int* tok2seq,
                    const int* btab, int btStride, int bs, int heads, int kvh, float scale, int window, float softcap,
                    const int* tiles, int ldq, int ldo) {
    constexpr int KS = HD + 8, VS = FA_KT + 8; // padded rows: conflict-free fragment loads
    __shared__ uint2 ksraw[FA_KT * KS / 4]; // uint2: the 8-byte stores below need the alignment
    __shared__ u32 vtraw[HD * VS / 2];
    u16* Ks = reinterpret_cast<u16*>(ksraw);
    u16* Vt = reinterpret_cast<u16*>(vtraw);
    const int tile = blockIdx.x, h = blockIdx.y;
    const int r0 = tiles[2 * tile], cnt = tiles[2 * tile + 1];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int kh = h / (heads / kvh);
    const int* bt = btab + (long long)tok2seq[r0] * btStride;
    const int pfirst = pos[r0], plast = pos[r0 + cnt - 1];
    const int ra = warp * 16 + g, rb = ra + 8; // this thread's two query rows in the tile
    const int pa = ra < cnt ? pos[r0 + ra] : -1, pb = rb < cnt ? pos[r0 + rb] : -1;
    const float qs = softcap > 0.f ? scale : scale * LOG2E;

    u32 qf[HD / 16][4];
    {
        const float* qa = q + (long long)(r0 + min(ra, cnt - 1)) * ldq + h * HD + 2 * t;
        const float* qb = q + (long long)(r0 + min(rb, cnt - 1)) * ldq + h * HD + 2 * t;
#pragma unroll
        for (int kc = 0; kc < HD / 16; kc++) {
            float2 a0 = ra < cnt ? *reinterpret_cast<const float2*>(qa + kc * 16) : f2(0.f, 0.f);
            float2 b0 = rb < cnt ? *reinterpret_cast<const float2*>(qb + kc * 16) : f2(0.f, 0.f);
            float2 a1 = ra < cnt ? *reinterpret_cast<const float2*>(qa + kc * 16 + 8) : f2(0.f, 0.f);
            float2 b1 = rb < cnt ? *reinterpret_cast<const float2*>(qb + kc * 16 + 8) : f2(0.f, 0.f);
            qf[kc][0] = f16x2(a0.x * qs, a0.y * qs);
            qf[kc][1] = f16x2(b0.x * qs, b0.y * qs);
            qf[kc][2] = f16x2(a1.x * qs, a1.y * qs);
            qf[kc][3] = f16x2(b1.x * qs, b1.y * qs);
        }
    }
    float o[HD / 8][4];
#pragma unroll
    for (int i = 0; i < HD / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
    float ma = NEG_INF, mb = NEG_INF, la = 0.f, lb = 0.f; // l: this thread's share of the row sum

    const int kstart = window > 0 ? max(0, pfirst - window + 1) : 0;
    for (int j0 = kstart; j0 <= plast; j0 += FA_KT) {
        __syncthreads(); // the previous tile's fragments have been read
        // K tile, row-major: consecutive threads take consecutive float4s
        // of a key row (coalesced). V tile, transposed: consecutive threads
        // take consecutive keys, so the 2-byte stores of a warp fall in
        // distinct banks. Keys past the end are zero (P is 0 there, but
        // 0 * garbage could be NaN). The loads go out FA_LB at a time
        // before any is used: v1 waited on each (a runtime-stride loop),
        // 32 L2 round trips per tile, and ran at ~31 TFLOP/s.
        constexpr int NV = FA_KT * HD / 4 / 128; // float4s per thread per tile (128 threads)
#pragma unroll
        for (int b0 = 0; b0 < NV; b0 += FA_LB) {
            float4 kv[FA_LB], vv[FA_LB];
#pragma unroll
            for (int i = 0; i < FA_LB; i++) {
                const int idx = threadIdx.x + (b0 + i) * 128;
                const int kk = idx / (HD / 4), d4 = (idx - kk * (HD / 4)) * 4, j = j0 + kk;
                kv[i] = f4(0.f, 0.f, 0.f, 0.f);
                if (j <= plast) {
                    long long blk = bt[j / bs];
                    kv[i] = *reinterpret_cast<const float4*>(Kc + ((blk * kvh + kh) * bs + j % bs) * HD + d4);
                }
                const int vk = idx % FA_KT, vd = (idx / FA_KT) * 4, jv = j0 + vk;
                vv[i] = f4(0.f, 0.f, 0.f, 0.f);
                if (jv <= plast) {
                    long long blk = bt[jv / bs];
                    vv[i] = *reinterpret_cast<const float4*>(Vc + ((blk * kvh + kh) * bs + jv % bs) * HD + vd);
                }
            }
#pragma unroll
            for (int i = 0; i < FA_LB; i++) {
                const int idx = threadIdx.x + (b0 + i) * 128;
                const int kk = idx / (HD / 4), d4 = (idx - kk * (HD / 4)) * 4;
                uint2 pk;
                pk.x = f16x2(kv[i].x, kv[i].y), pk.y = f16x2(kv[i].z, kv[i].w);
                *reinterpret_cast<uint2*>(Ks + kk * KS + d4) = pk;
                const int vk = idx % FA_KT, vd = (idx / FA_KT) * 4;
                Vt[(vd + 0) * VS + vk] = f16bits(vv[i].x);
                Vt[(vd + 1) * VS + vk] = f16bits(vv[i].y);
                Vt[(vd + 2) * VS + vk] = f16bits(vv[i].z);
                Vt[(vd + 3) * VS + vk] = f16bits(vv[i].w);
            }
        }
        __syncthreads();
        if (warp * 16 >= cnt) continue; // no rows for this warp (short last tile); warp-uniform, as mma.sync needs

        float sf[FA_KT / 8][4];
#pragma unroll
        for (int nt = 0; nt < FA_KT / 8; nt++) {
            sf[nt][0] = sf[nt][1] = sf[nt][2] = sf[nt][3] = 0.f;
            const u16* kr = Ks + (nt * 8 + g) * KS + 2 * t;
#pragma unroll
            for (int kc = 0; kc < HD / 16; kc++) {
                u32 b0 = *reinterpret_cast<const u32*>(kr + kc * 16);
                u32 b1 = *reinterpret_cast<const u32*>(kr + kc * 16 + 8);
                mma_f16(sf[nt], qf[kc][0], qf[kc][1], qf[kc][2], qf[kc][3], b0, b1);
            }
        }
        // Mask (causal, window, rows past the tile), softcap; row maxima.
        float mxa = NEG_INF, mxb = NEG_INF;
#pragma unroll
        for (int nt = 0; nt < FA_KT / 8; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int j = j0 + nt * 8 + 2 * t + (i & 1), p = i < 2 ? pa : pb;
                const bool ok = p >= 0 && j <= p && (window <= 0 || j > p - window);
                float s = sf[nt][i];
                if (softcap > 0.f) s = softcap * tanhf(s / softcap) * LOG2E;
                s = ok ? s : NEG_INF;
                sf[nt][i] = s;
                if (i < 2) mxa = fmaxf(mxa, s);
                else mxb = fmaxf(mxb, s);
            }
        mxa = fmaxf(mxa, __shfl_xor_sync(0xffffffffu, mxa, 1));
        mxa = fmaxf(mxa, __shfl_xor_sync(0xffffffffu, mxa, 2));
        mxb = fmaxf(mxb, __shfl_xor_sync(0xffffffffu, mxb, 1));
        mxb = fmaxf(mxb, __shfl_xor_sync(0xffffffffu, mxb, 2));
        const float na = fmaxf(ma, mxa), nb = fmaxf(mb, mxb);
        // A row with no key yet keeps max -inf: use 0 so exp2 gives 0, not NaN.
        const float ua = na == NEG_INF ? 0.f : na, ub = nb == NEG_INF ? 0.f : nb;
        const float ca = exp2f(ma - ua), cb = exp2f(mb - ub);
        ma = na, mb = nb;
        la *= ca, lb *= cb;
#pragma unroll
        for (int i = 0; i < HD / 8; i++) o[i][0] *= ca, o[i][1] *= ca, o[i][2] *= cb, o[i][3] *= cb;
#pragma unroll
        for (int nt = 0; nt < FA_KT / 8; nt++) {
            sf[nt][0] = exp2f(sf[nt][0] - ua), sf[nt][1] = exp2f(sf[nt][1] - ua);
            sf[nt][2] = exp2f(sf[nt][2] - ub), sf[nt][3] = exp2f(sf[nt][3] - ub);
            la += sf[nt][0] + sf[nt][1], lb += sf[nt][2] + sf[nt][3];
        }
        // O += P V, 16 keys a step.
#pragma unroll
        for (int kc = 0; kc < FA_KT / 16; kc++) {
            const u32 a0 = f16x2(sf[2 * kc][0], sf[2 * kc][1]), a1 = f16x2(sf[2 * kc][2], sf[2 * kc][3]);
            const u32 a2 = f16x2(sf[2 * kc + 1][0], sf[2 * kc + 1][1]), a3 = f16x2(sf[2 * kc + 1][2], sf[2 * kc + 1][3]);
#pragma unroll
            for (int nd = 0; nd < HD / 8; nd++) {
                const u16* vr = Vt + (nd * 8 + g) * VS + kc * 16 + 2 * t;
                u32 b0 = *reinterpret_cast<const u32*>(vr), b1 = *reinterpret_cast<const u32*>(vr + 8);
                mma_f16(o[nd], a0, a1, a2, a3, b0, b1);
            }
        }
    }
    la += __shfl_xor_sync(0xffffffffu, la, 1);
    la += __shfl_xor_sync(0xffffffffu, la, 2);
    lb += __shfl_xor_sync(0xffffffffu, lb, 1);
    lb += __shfl_xor_sync(0xffffffffu, lb, 2);
    const float ia = la > 0.f ? 1.f / la : 0.f, ib = lb > 0.f ? 1.f / lb : 0.f;
#pragma unroll
    for (int nd = 0; nd < HD / 8; nd++) {
        const int d = h * HD + nd * 8 + 2 * t;
        if (ra < cnt) *reinterpret_cast<float2*>(out + (long long)(r0 + ra) * ldo + d) = f2(o[nd][0] * ia, o[nd][1] * ia);
        if (rb < cnt) *reinterpret_cast<float2*>(out + (long long)(r0 + rb) * ldo + d) = f2(o[nd][2] * ib, o[nd][3] * ib);
    }
}
#define FLASH(HD)                                                                                                     \
    extern "C" __global__ void __launch_bounds__(128) flash_attn_##HD(                                              \
        float* out, const float* q, const float* Kc, const float* Vc, const int* pos, const int* tok2seq,            \
        const int* btab, int btStride, int bs, int heads, int kvh, float scale, int window, float softcap,           \
        const int* tiles, int ldq, int ldo) {                                                                        \
        flash_impl<HD>(out, q, Kc, Vc, pos, tok2seq, btab, btStride, bs, heads, kvh, scale, window, softcap, tiles,   \
                       ldq, ldo);                                                                                     \
    }
FLASH(64) FLASH(128)
