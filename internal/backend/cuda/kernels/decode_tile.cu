// Batched decode attention on the tensor cores (attn_dtile_<HD>): decode
// steps of many sequences, where attn_decode's per-key warp reductions
// (5 shuffles a key and query head) made the kernel instruction-bound at
// a quarter of the copy rate (notes/cuda-kernels.md, session 13).
//
// A block serves one (sequence, kv head, split): the G <= 8 query heads of
// the kv head are the rows of an m16 tile, each K/V row is read once for
// the group. Rows 0-7 hold q rounded to f16 and rows 8-15 the remainder
// q - f16(q), so S = Q K^T carries ~22 bits of q (row g plus row g+8 of
// the C fragment, which the same thread holds); P takes the same form in
// P V, so only K and V carry f16 rounding, as the cache holds them.
//
// Each of the 4 warps walks its own tiles of DT_KT keys (tiles warp,
// warp+4, ... of the split) through DT_ST stages of its own shared memory:
// 16-byte cp.async from the paged cache, ldmatrix into mma.m16n8k16 (the
// flash kernel's fragment helpers), an online softmax in base 2 per head
// row. No block barrier runs in the key loop. The warps merge through
// shared memory, and the splits of a (sequence, kv head) through the
// thread block cluster (grid z = splits = cluster z), as attn_decode's _c
// kernels do (merge_head_splits), or, past the cluster limit (one sequence
// at a long context needs more blocks), through partials in global memory
// merged by the last block of the (sequence, kv head).
//
// The step's own key and value come from k/v rows (f32): the block whose
// split holds position p rotates and normalises k (RoPE and Qwen3's
// k_norm folded, as attn_decode), stores both into the cache, and patches
// them into its tile (the copy of that slot is a zero fill, so no block
// reads a slot being written). q is rotated and normalised in the same
// prologue; nothing is written back (the Go side runs this kernel only
// for AttnParams.ScratchQK).

#define DT_W 4   // warps a block
#define DT_KT 16 // keys a warp's tile
#define DT_ST 2  // tile stages a warp
#define LN2F 0.6931471805599453f

// dtcfg: byte offsets of the dynamic shared memory (plan.DecodeTileSmem
// mirrors SMEM): Q rows (hi 0-7, lo 8-15), this step's k and v as f16,
// then each warp's stages (a K tile then a V tile, rows padded by 8
// halves as in flash.cu). After the key loop a warp's stages hold its
// partial output for the warp merge.
template <int HD>
struct dtcfg {
    static constexpr int KS = HD + 8, TILE = DT_KT * KS * 2, STAGE = 2 * TILE, WARP = DT_ST * STAGE;
    static constexpr int QB = 16 * KS * 2, SELF = 2 * HD * 2, SMEM = QB + SELF + DT_W * WARP;
    static_assert(8 * HD * 4 + 16 * 4 <= WARP, "a warp's partial fits its stages");
};

// dt_hilo packs a pair as f16 (hi) and the pair of remainders (lo).
DEV void dt_hilo(float a, float b, u32& hi, u32& lo) {
    hi = f16x2(a, b);
    lo = f16x2(a - f16f((u16)(hi & 0xffffu)), b - f16f((u16)(hi >> 16)));
}

// Over an E4M3 cache (KV KvF8) a warp's first stage holds its f16 K and V
// tile and the second its DT_ST stages of code tiles (unpadded rows of HD
// bytes; they fit), copied by cp.async as the f16 tiles are and widened
// into the first stage when they have landed (fa_widen): the f16 kernel's
// loop and fragments are unchanged, for one shared-memory pass a tile.
template <int HD, class KV = KvF16>
DEV void attn_dtile_impl(float* out, float* part, int* cnt, const float* q, typename KV::T* Kc, typename KV::T* Vc,
                         const int* pos, const int* tok2seq,
                         const int* btab, int btStride, int bs, int heads, int kvh, float scale, int window,
                         float softcap, const float* kin, const float* vin, int ldk, const float* invf, int half,
                         float rscale, const float* qn, const float* kn, float neps, const float* sinks) {
    using C = dtcfg<HD>;
    constexpr bool F8 = KV::F8;
    constexpr int RH = F8 ? HD / 2 : HD; // the copy's row in halves (fp8: HD bytes)
    constexpr int VPL = HD / 32, CH = RH / 8, RP = 32 / CH; // dims a lane (prologue); chunks a row, rows a copy pass
    constexpr int RT = DT_KT * HD;                          // fp8: a code tile's bytes
    static_assert(!F8 || DT_ST * 2 * RT <= (DT_ST - 1) * C::STAGE, "fp8 code stages fit after the f16 stage");
    extern __shared__ __align__(16) u16 dsm[];
    __shared__ float cm[8], cs[8], co[8][HD]; // this split's partials, read by the cluster
    char* const sm = reinterpret_cast<char*>(dsm);
    const u32 base = fa_smem(dsm);
    const int kh = blockIdx.x, t = blockIdx.y, split = blockIdx.z, S = gridDim.z;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int G = heads / kvh, h0 = kh * G;
    const int p = pos[t];
    const int first = window > 0 ? max(0, p - window + 1) : 0;
    const int per = (p - first + 1 + S - 1) / S;
    const int j0 = first + split * per, j1 = min(j0 + per, p + 1);
    const bool hasp = j0 <= p && p < j1; // this block holds the step's own key
    const int* bt = btab + (long long)tok2seq[t] * btStride;
    const int ntiles = j1 > j0 ? (j1 - j0 + DT_KT - 1) / DT_KT : 0;
    const int wofs = C::QB + C::SELF + warp * C::WARP; // this warp's stages

    // issue starts the copy of this warp's i-th tile (tile warp + i*DT_W
    // of the split) into stage i % DT_ST and commits a group, empty past
    // the last tile so that the group count stays uniform. Lane r < DT_KT
    // looks up key r's cache row; each pass copies RP rows, a row's
    // chunks on consecutive lanes.
    auto issue = [&](int i) {
        const int tile = warp + i * DT_W;
        if (tile < ntiles) {
            const int js = j0 + tile * DT_KT, j = js + lane;
            int row = -1;
            if (lane < DT_KT && j < j1 && j != p) row = (bt[j / bs] * kvh + kh) * bs + j % bs;
            const u32 st = F8 ? base + wofs + C::STAGE + (i % DT_ST) * 2 * RT : base + wofs + (i % DT_ST) * C::STAGE;
            const int c = lane % CH;
            const u16 *kc = reinterpret_cast<const u16*>(Kc), *vc = reinterpret_cast<const u16*>(Vc);
#pragma unroll
            for (int r0 = 0; r0 < DT_KT; r0 += RP) {
                const int r = r0 + lane / CH, cr = __shfl_sync(0xffffffffu, row, r);
                const long long off = cr >= 0 ? (long long)cr * RH + c * 8 : 0;
                const u32 d = st + (r * (F8 ? RH : C::KS) + c * 8) * 2;
                fa_cp16(d, kc + off, cr >= 0 ? 16 : 0);
                fa_cp16(d + (F8 ? RT : C::TILE), vc + off, cr >= 0 ? 16 : 0);
            }
        }
        fa_commit();
    };
    // The cached keys before p were written by earlier steps and the block
    // tables are step inputs: the first tiles load before the wait for the
    // q/k/v projection (PDL).
#pragma unroll
    for (int i = 0; i < DT_ST; i++) issue(i);
    float rc[VPL], rsn[VPL], qw[VPL], kw[VPL];
    const bool rok = invf ? rope_angles<VPL>(rc, rsn, invf, half, rscale, p, lane) : false;
#pragma unroll
    for (int i = 0; i < VPL; i++) qw[i] = qn ? qn[lane * VPL + i] : 0.f, kw[i] = kn ? kn[lane * VPL + i] : 0.f;
    grid_dep_wait();

    // Prologue: q rows (normalised, rotated, pre-scaled for base 2 unless
    // softcapped) as hi/lo f16 rows; this step's k and v.
    const float qs = softcap > 0.f ? scale : scale * LOG2E;
    for (int g = warp; g < 8; g += DT_W) {
        float v[VPL];
#pragma unroll
        for (int i = 0; i < VPL; i++) v[i] = g < G ? q[((long long)t * heads + h0 + g) * HD + lane * VPL + i] : 0.f;
        if (qn && g < G) head_norm<VPL>(v, qw, neps);
        if (invf && g < G) rope_apply<VPL>(v, rc, rsn, rok, half, lane);
#pragma unroll
        for (int i = 0; i < VPL; i++) {
            const float x = v[i] * qs;
            const u16 hi = f16bits(x);
            dsm[g * C::KS + lane * VPL + i] = hi;
            dsm[(g + 8) * C::KS + lane * VPL + i] = f16bits(x - f16f(hi));
        }
    }
    if (hasp && warp == DT_W - 1) {
        float kv[VPL];
        const float* kr = kin + (long long)t * ldk + kh * HD + lane * VPL;
        const float* vr = vin + (long long)t * ldk + kh * HD + lane * VPL;
#pragma unroll
        for (int i = 0; i < VPL; i++) kv[i] = kr[i];
        if (kn) head_norm<VPL>(kv, kw, neps);
        if (invf) rope_apply<VPL>(kv, rc, rsn, rok, half, lane);
        u16* sk = reinterpret_cast<u16*>(sm + C::QB);
        const long long dst = ((bt[p / bs] * (long long)kvh + kh) * bs + p % bs) * HD + lane * VPL;
#pragma unroll
        for (int i = 0; i < VPL; i++) {
            if constexpr (F8) { // the tile gets the codes' values, as the CPU store reads them
                const u8 k8 = e4m3_enc(kv[i]), v8 = e4m3_enc(vr[i]);
                sk[lane * VPL + i] = (u16)(e4m3_h2(k8) & 0xffffu), sk[HD + lane * VPL + i] = (u16)(e4m3_h2(v8) & 0xffffu);
                Kc[dst + i] = k8, Vc[dst + i] = v8;
            } else {
                const u16 kb = f16bits(kv[i]), vb = f16bits(vr[i]);
                sk[lane * VPL + i] = kb, sk[HD + lane * VPL + i] = vb;
                Kc[dst + i] = kb, Vc[dst + i] = vb;
            }
        }
    }
    __syncthreads();

    // Q's A fragments for the whole key loop (HD/16 k-steps).
    u32 qa[HD / 16][4];
    {
        const u32 qaddr = base + (((lane & 7) + ((lane >> 3) & 1) * 8) * C::KS + (lane >> 4) * 8) * 2;
#pragma unroll
        for (int kc = 0; kc < HD / 16; kc++) fa_ldsm(qa[kc], qaddr + kc * 32);
    }
    const int ct = lane & 3; // this thread's key pair in an 8-key n-tile
    const float sk = softcap > 0.f ? __fdividef(-2.f * LOG2E, softcap) : 0.f, sc = softcap * LOG2E;
    float o[HD / 8][4];
#pragma unroll
    for (int i = 0; i < HD / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
    float mrow = NEG_INF, lrow = 0.f; // head lane/4: running max (base 2), this thread's share of the sum
    const int mine = ntiles > warp ? (ntiles - warp + DT_W - 1) / DT_W : 0;
    const u32 kl = fa_klane<HD>(lane), vl = C::TILE + fa_vlane<HD>(lane);
    for (int i = 0; i < mine; i++) {
        fa_wait1(); // tile i has landed (tile i+1 may be in flight)
        __syncwarp();
        const int js = j0 + (warp + i * DT_W) * DT_KT;
        const int so = F8 ? wofs : wofs + (i % DT_ST) * C::STAGE;
        if constexpr (F8) { // widen the landed code tiles into the f16 stage
            fa_widen<HD, 32, DT_KT>(sm, wofs, wofs + C::STAGE + (i % DT_ST) * 2 * RT, lane);
            __syncwarp();
        }
        if (hasp && p >= js && p < js + DT_KT) { // warp-uniform: patch the step's own key and value in
            const u32* src = reinterpret_cast<const u32*>(sm + C::QB);
            u32* kd = reinterpret_cast<u32*>(sm + so + (p - js) * C::KS * 2);
            u32* vd = reinterpret_cast<u32*>(sm + so + C::TILE + (p - js) * C::KS * 2);
            for (int w = lane; w < HD / 2; w += 32) kd[w] = src[w], vd[w] = src[HD / 2 + w];
            __syncwarp();
        }
        const u32 st = base + so;
        float sf[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
        for (int kc = 0; kc < HD / 16; kc++) {
            u32 b[4];
            fa_ldsm(b, st + kl + kc * 32);
            mma_f16(sf[0], qa[kc][0], qa[kc][1], qa[kc][2], qa[kc][3], b[0], b[1]);
            mma_f16(sf[1], qa[kc][0], qa[kc][1], qa[kc][2], qa[kc][3], b[2], b[3]);
        }
        // Scores of head lane/4 for keys 2ct, 2ct+1 of each n-tile: hi row + lo row.
        float s[4] = {sf[0][0] + sf[0][2], sf[0][1] + sf[0][3], sf[1][0] + sf[1][2], sf[1][1] + sf[1][3]};
        float mx = NEG_INF;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            if (softcap > 0.f) s[k] = fa_softcap(s[k], sk, sc);
            if (js + (k >> 1) * 8 + 2 * ct + (k & 1) >= j1) s[k] = NEG_INF;
            mx = fmaxf(mx, s[k]);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float nm = fmaxf(mrow, mx), um = nm == NEG_INF ? 0.f : nm;
        const float corr = fa_exp2(mrow - um);
        mrow = nm;
        if (__any_sync(0xffffffffu, corr != 1.f)) {
            lrow *= corr;
#pragma unroll
            for (int d = 0; d < HD / 8; d++) o[d][0] *= corr, o[d][1] *= corr, o[d][2] *= corr, o[d][3] *= corr;
        }
        float pr[4];
#pragma unroll
        for (int k = 0; k < 4; k++) pr[k] = fa_exp2(s[k] - um), lrow += pr[k];
        u32 a0, a1, a2, a3; // P's A fragment: rows g (hi) and g+8 (lo), keys 2ct.. of n-tiles 0 and 1
        dt_hilo(pr[0], pr[1], a0, a1);
        dt_hilo(pr[2], pr[3], a2, a3);
#pragma unroll
        for (int dp = 0; dp < HD / 16; dp++) {
            u32 b[4];
            fa_ldsm_t(b, st + vl + dp * 32);
            mma_f16(o[2 * dp], a0, a1, a2, a3, b[0], b[1]);
            mma_f16(o[2 * dp + 1], a0, a1, a2, a3, b[2], b[3]);
        }
        __syncwarp(); // every lane is done with the stage before it is refilled
        issue(i + DT_ST);
    }
    fa_wait0();
    __syncwarp();

    // Warp merge: each warp's partial (its max, sum and unnormalised
    // output per head) into its own stages, then every thread merges some
    // outputs over the 4 warps.
    lrow += __shfl_xor_sync(0xffffffffu, lrow, 1);
    lrow += __shfl_xor_sync(0xffffffffu, lrow, 2);
    {
        float* wo = reinterpret_cast<float*>(sm + wofs);
        const int g = lane >> 2;
#pragma unroll
        for (int d = 0; d < HD / 8; d++)
            *reinterpret_cast<float2*>(wo + g * HD + d * 8 + 2 * ct) = f2(o[d][0] + o[d][2], o[d][1] + o[d][3]);
        if (ct == 0) wo[8 * HD + g] = mrow, wo[8 * HD + 8 + g] = lrow;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < G * HD; e += 32 * DT_W) {
        const int g = e / HD, d = e - g * HD;
        float M = NEG_INF;
#pragma unroll
        for (int w = 0; w < DT_W; w++) M = fmaxf(M, reinterpret_cast<const float*>(sm + C::QB + C::SELF + w * C::WARP)[8 * HD + g]);
        float L = 0.f, acc = 0.f;
#pragma unroll
        for (int w = 0; w < DT_W; w++) {
            const float* wo = reinterpret_cast<const float*>(sm + C::QB + C::SELF + w * C::WARP);
            const float f = wo[8 * HD + g] == NEG_INF ? 0.f : fa_exp2(wo[8 * HD + g] - M);
            L += wo[8 * HD + 8 + g] * f;
            acc += wo[g * HD + d] * f;
        }
        const float Mn = M == NEG_INF ? NEG_INF : M * LN2F; // natural units for the split merge
        if (S == 1) {
            out[((long long)t * heads + h0 + g) * HD + d] = L > 0.f ? acc / sink_sum(L, Mn, sinks ? sinks + h0 + g : nullptr) : 0.f;
        } else if (cnt) {
            float* pp = part + (((long long)t * heads + h0 + g) * S + split) * (HD + 2);
            if (d == 0) pp[0] = Mn, pp[1] = L;
            pp[2 + d] = acc;
        } else {
            co[g][d] = acc;
            if (d == 0) cm[g] = Mn, cs[g] = L;
        }
    }
    if (S > 1 && cnt) { // more splits than a cluster: the last block of the (sequence, kv head) merges
        if (!last_block(cnt + (long long)t * kvh + kh, S)) return;
        const float* pb0 = part + ((long long)t * heads + h0) * S * (HD + 2);
        merge_head_splits<HD, 8>(out + ((long long)t * heads + h0) * HD, G, S, 0, G * HD, sinks ? sinks + h0 : nullptr,
                                 [&](int g, int s) {
                                     const float* pp = pb0 + ((long long)g * S + s) * (HD + 2);
                                     return float2{ldcg(pp), ldcg(pp + 1)};
                                 },
                                 [&](int g, int d, int s) { return ldcg(pb0 + ((long long)g * S + s) * (HD + 2) + 2 + d); });
    } else if (S > 1) { // the splits are one thread block cluster
        cluster_sync();
        const int chunk = (G * HD + S - 1) / S, e0 = (int)cluster_rank() * chunk;
        merge_head_splits<HD, 8>(out + ((long long)t * heads + h0) * HD, G, S, e0, min(e0 + chunk, G * HD),
                                 sinks ? sinks + h0 : nullptr,
                                 [&](int g, int s) { return float2{ld_cluster(&cm[g], s), ld_cluster(&cs[g], s)}; },
                                 [&](int g, int d, int s) { return ld_cluster(&co[g][d], s); });
        cluster_sync();
    }
}

// Grid (kv heads, tokens, splits); with splits > 1 either cluster (1, 1,
// splits) and no cnt, or cnt (zeroed counters, one per (token, kv head),
// left zero) and part (token x head x split partials of HD + 2 floats);
// 128 threads and dtcfg<HD>::SMEM bytes of dynamic shared memory. SFX
// _f8: over an E4M3 cache. sinks: [heads] sink logits (gpt-oss) or null,
// added to each head's softmax sum as attn_decode does (sink_sum).
#define ATTN_DTILE(HD, SFX, KV)                                                                                     \
    extern "C" __global__ void __launch_bounds__(128, 2) attn_dtile_##HD##SFX(                                    \
        float* out, float* part, int* cnt, const float* q, KV::T* Kc, KV::T* Vc, const int* pos,                  \
        const int* tok2seq, const int* btab,                                                                       \
        int btStride, int bs, int heads, int kvh, float scale, int window, float softcap, const float* kin,        \
        const float* vin, int ldk, const float* invf, int half, float rscale, const float* qn, const float* kn,     \
        float neps, const float* sinks) {                                                                          \
        grid_dep_launch();                                                                                         \
        attn_dtile_impl<HD, KV>(out, part, cnt, q, Kc, Vc, pos, tok2seq, btab, btStride, bs, heads, kvh, scale,   \
                                window, softcap, kin, vin, ldk, invf, half, rscale, qn, kn, neps, sinks);          \
    }
ATTN_DTILE(64, , KvF16) ATTN_DTILE(128, , KvF16) ATTN_DTILE(64, _f8, KvF8) ATTN_DTILE(128, _f8, KvF8)
ATTN_DTILE(256, , KvF16) ATTN_DTILE(256, _f8, KvF8)
