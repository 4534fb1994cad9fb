// Flash attention for prefill on the tensor cores (mma.m16n8k16, f16
// operands, f32 accumulation), after kv_store has written the step's keys
// and values into the paged f16 cache. FlashAttention-2 structure, over
// query tiles (FA_ROWS = 128 consecutive rows of one sequence and one
// head; flashTile in step.go), walking the
// keys in tiles of FA_KT = 64 that all warps share through shared memory
// (each K or V tile is read from L2 once per 128 queries). S = QK^T, the
// online softmax and O = PV stay in registers.
//
// flash2_attn_*: 4 warps of 32 query rows (two m16 tiles),
// so each K/V fragment from ldmatrix feeds 4 mma instead of 2 and shared
// memory is not the limit. Q (f16, pre-scaled) sits in shared memory and
// its fragments are reloaded per tile, which leaves registers for two
// blocks per SM: one block's softmax and barrier hide behind the other's
// mma. K and V tiles are double-buffered in dynamic shared memory (104 KB
// for HD 128, set through cuFuncSetAttribute at start), so a tile costs
// one barrier: tile j+1 loads while tile j is used. A warp skips the
// tiles no row of it sees (causal diagonal, window start). Head dims 256
// and 512 (Gemma 4) run the same body in another shape (f2cfg below): 8
// warps of 16 rows; at 512 a pair of warps shares 16 rows, each holding
// half of O's dims, and a query tile takes two blocks of 64 rows.
//
// Tiles arrive by 16-byte cp.async straight from the paged cache (a key's
// row is HD f16 contiguous), so no thread waits on a load. B fragments
// come from the row-major tiles by ldmatrix: K non-transposed (key rows,
// dims contiguous = the .col B operand of S), V with .trans (the .col B
// operand of PV wants dims as columns). Rows are padded by 16 bytes (HD +
// 8 halves): the 8 row addresses of one 8x8 matrix then fall in 8
// distinct 16-byte bank groups, conflict-free, and 16-byte aligned for
// cp.async.
//
// Fragment layout as in mma.cu. S's C fragments of two adjacent key
// 8-tiles are exactly P's A fragment for one 16-key step of PV, so P never
// touches shared memory. Softmax runs in base 2: Q is pre-multiplied by
// scale*log2(e) (by scale alone with a softcap, which is applied to the
// natural-unit score). Masks (causal, window, keys past the last row) are
// evaluated only on tiles that need them.
//
// Blocks run heaviest first: the linear block index is spread over heads
// fastest and over query tiles from the last, so the causal tail is short
// and the query heads of one KV head read the same tiles at the same time.
//
// Limits: head dims 64, 128, 256 and 512; others use the generic kernel. Q must fit f16 (|x| <
// 65504), true of post-norm activations.

#define FA_KT 64             // keys per tile
#define FA_ROWS 128          // query rows per tile (flashTile in step.go)
#define F2_W 4               // warps per block at HD 64/128, 32 query rows each
#define F2_T (F2_W * 32)     // threads per block (flash2Geom in Go)
#define LOG2E 1.4426950408889634f
static_assert(F2_W * 32 == FA_ROWS, "a block of 4 warps takes a query tile");

DEV float2 f2(float a, float b) {
    float2 r;
    r.x = a, r.y = b;
    return r;
}
DEV void fa_wait1() { asm volatile("cp.async.wait_group 1;" ::: "memory"); }
DEV void fa_wait0() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }
DEV void fa_ldsm(u32 (&r)[4], u32 a) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
DEV void fa_ldsm_t(u32 (&r)[4], u32 a) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
DEV float fa_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// A tile is copied by NT threads, FA_N 16-byte chunks each: thread x takes
// chunk x % CH (CH = HD / 8 chunks a row) of FA_N consecutive rows from
// (x / CH) * FA_N. At one copy instruction consecutive threads take
// consecutive chunks of a row (coalesced; each 8 chunks cover the 32
// banks once), and a thread's keys are consecutive, so its block-table
// walk needs one division per tile.
#define FA_NK(HD, NT, KT) ((KT) * (HD) / 8 / (NT))

// fa_rows finds, for the thread's FA_N keys of the tile at j0, the cache
// row ((block * kvh + kh) * bs + slot) or -1 past plast. K and V tiles of
// the same keys share it, so the block-table lookups happen once per tile.
template <int HD, int NT, int KT = FA_KT>
DEV void fa_rows(int (&row)[FA_NK(HD, NT, KT)], const int* bt, int j0, int plast, int bs, int kvh, int kh) {
    const int j = j0 + (int)threadIdx.x / (HD / 8) * FA_NK(HD, NT, KT);
    unsigned blk = (unsigned)j / (unsigned)bs, slot = (unsigned)j % (unsigned)bs;
#pragma unroll
    for (int i = 0; i < FA_NK(HD, NT, KT); i++) {
        // Only keys up to plast look up the table (its width ends there).
        row[i] = j + i <= plast ? (bt[blk] * kvh + kh) * bs + (int)slot : -1;
        if (++slot == (unsigned)bs) slot = 0, blk++;
    }
}
// fa_copy starts the copy of one tile into the padded tile at shared
// address dst (rows of KS halves); rows past the end become zeros (P is 0
// there, but 0 * stale garbage could be NaN). An E4M3 tile is copied as
// the f16 tile of half its head dim (HD/2 halves = HD bytes a row),
// unpadded (KS = HD/2), for fa_widen.
template <int HD, int NT, int KT = FA_KT, int KS = HD + 8>
DEV void fa_copy(u32 dst, const void* cache, const int (&row)[FA_NK(HD, NT, KT)]) {
    constexpr int CH = HD / 8;
    const u16* c16 = reinterpret_cast<const u16*>(cache);
    const int c = threadIdx.x % CH, r0 = (int)threadIdx.x / CH * FA_NK(HD, NT, KT);
#pragma unroll
    for (int i = 0; i < FA_NK(HD, NT, KT); i++) {
        const u16* src = row[i] >= 0 ? c16 + (long long)row[i] * HD + c * 8 : c16;
        fa_cp16(dst + ((r0 + i) * KS + c * 8) * 2, src, row[i] >= 0 ? 16 : 0);
    }
}
// fa_widen turns a K tile and a V tile of E4M3 codes (KT unpadded rows of
// HD bytes, V right after K, at byte offset src of sm) into the padded f16
// tiles at dst (V TB bytes after K), with threads tid = 0..NT-1 taking 16
// codes at a time: the fp8 kernels' tiles land by cp.async as codes and
// are widened once in shared memory, so ldmatrix and the mma see the same
// f16 tiles as the f16 kernels (an E4M3 value is exact in f16).
template <int HD, int NT, int KT>
DEV void fa_widen(char* sm, u32 dst, u32 src, int tid) {
    constexpr int CR = HD / 16, N = 2 * KT * CR / NT, TB = KT * (HD + 8) * 2;
    static_assert(N * NT == 2 * KT * CR, "fa_widen: whole chunks a thread");
#pragma unroll
    for (int i = 0; i < N; i++) {
        const int e = tid + i * NT, v = e >= KT * CR, k = e - v * KT * CR, r = k / CR, c = k % CR;
        const uint4 x = *reinterpret_cast<const uint4*>(sm + src + v * KT * HD + k * 16);
        uint4 lo, hi;
        lo.x = e4m3_h2(x.x), lo.y = e4m3_h2(x.x >> 16), lo.z = e4m3_h2(x.y), lo.w = e4m3_h2(x.y >> 16);
        hi.x = e4m3_h2(x.z), hi.y = e4m3_h2(x.z >> 16), hi.z = e4m3_h2(x.w), hi.w = e4m3_h2(x.w >> 16);
        uint4* d = reinterpret_cast<uint4*>(sm + dst + v * TB + (r * (HD + 8) + c * 16) * 2);
        d[0] = lo, d[1] = hi;
    }
}

// Byte offsets in a padded tile of the 16x16 blocks ldmatrix reads at QK
// step s (dims (s / 4) * 16, keys (s % 4) * 16) and PV step s (keys
// (s / (DO / 16)) * 16, dims (s % (DO / 16)) * 16 of the DO a warp owns).
template <int HD>
DEV constexpr u32 fa_koff(int s) { return ((s % (FA_KT / 16)) * 16 * (HD + 8) + (s / (FA_KT / 16)) * 16) * 2; }
template <int HD, int DO = HD>
DEV constexpr u32 fa_voff(int s) { return ((s / (DO / 16)) * 16 * (HD + 8) + (s % (DO / 16)) * 16) * 2; }
// ldmatrix row addresses of a lane (matrix lane/8, row lane%8), bytes
// from a padded tile. K, x4 = {keys 0-7, 8-15} x {dims 0-7, 8-15} of a
// 16x16 block: b0, b1 of key 8-tile nt, then b0, b1 of nt+1.
template <int HD>
DEV u32 fa_klane(int lane) { return (((lane >> 4) * 8 + (lane & 7)) * (HD + 8) + ((lane >> 3) & 1) * 8) * 2; }
// V, x4 .trans = {dims 0-7, 8-15} x {keys 0-7, 8-15}: b0, b1 of dim
// 8-tile nd, then b0, b1 of nd+1.
template <int HD>
DEV u32 fa_vlane(int lane) { return ((((lane >> 3) & 1) * 8 + (lane & 7)) * (HD + 8) + (lane >> 4) * 8) * 2; }

// fa_blk is what a block serves: head h (kv head kh) for query rows r0..
// r0+cnt-1 of one sequence at positions pfirst..plast, keys from kstart.
// With SUB > 1 a query tile is served by SUB blocks of FA_ROWS / SUB
// rows (grid x = tiles * SUB), the later rows first; one left without
// rows (a short tile) gets cnt <= 0 and nothing else.
struct fa_blk {
    int h, kh, r0, cnt, pfirst, plast, kstart;
    const int* bt; // the sequence's block table
};
template <int SUB = 1>
DEV fa_blk fa_block(const int* pos, const int* tok2seq, const int* btab, int btStride, int heads, int kvh, int window,
                    const int* tiles) {
    fa_blk b;
    const int lin = blockIdx.x + blockIdx.y * gridDim.x;
    const int tile = gridDim.x / SUB - 1 - lin / (heads * SUB);
    b.h = lin % heads, b.kh = b.h / (heads / kvh);
    b.r0 = tiles[2 * tile], b.cnt = tiles[2 * tile + 1];
    if (SUB > 1) {
        constexpr int R = FA_ROWS / SUB;
        const int sb = SUB - 1 - lin / heads % SUB;
        b.r0 += sb * R, b.cnt = min(R, b.cnt - sb * R);
        if (b.cnt <= 0) return b;
    }
    b.bt = btab + (long long)tok2seq[b.r0] * btStride;
    b.pfirst = pos[b.r0], b.plast = pos[b.r0 + b.cnt - 1];
    b.kstart = window > 0 ? max(0, b.pfirst - window + 1) : 0;
    return b;
}

// fa_softcap is softcap * tanh(x / softcap) in base-2 units, branch-free
// (k = -2 log2(e) / softcap, c = softcap log2(e)): tanh|y| = (1 - e) / (1
// + e) with e = 2^(-2|y| log2 e); the absolute error stays near softcap *
// 1e-7, which is what the softmax sees.
DEV float fa_softcap(float x, float k, float c) {
    const float e = fa_exp2(fabsf(x) * k);
    return copysignf(__fdividef(1.f - e, 1.f + e) * c, x);
}

// The per-tile softmax of one 16-row m-tile: scores sf (C fragments of
// key 8-tiles), this thread's rows ra and ra + 8 of the block (g and g+8
// of the m-tile), their running max and share of the row sum.
//
// fa_mods applies the softcap and, when mask, the masks. Positions are
// consecutive within a tile (ops.go checks b.step.consecutive).
template <int NK>
DEV void fa_mods(float (&sf)[NK / 8][4], float softcap, bool mask, int j0, int pfirst, int ra, int cnt, int window) {
    if (softcap > 0.f) {
        const float k = __fdividef(-2.f * LOG2E, softcap), c = softcap * LOG2E;
#pragma unroll
        for (int nt = 0; nt < NK / 8; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++) sf[nt][i] = fa_softcap(sf[nt][i], k, c);
    }
    if (mask) {
        const int t = threadIdx.x & 3;
#pragma unroll
        for (int nt = 0; nt < NK / 8; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int r = i < 2 ? ra : ra + 8, p = pfirst + r, j = j0 + nt * 8 + 2 * t + (i & 1);
                const bool ok = r < cnt && j <= p && (window <= 0 || j > p - window);
                sf[nt][i] = ok ? sf[nt][i] : NEG_INF;
            }
    }
}
// fa_softmax turns sf into P (unnormalised, base 2) and rescales o and the
// sums to the new row maxima. Called by whole warps (it votes).
template <int HD, int NK>
DEV void fa_softmax(float (&sf)[NK / 8][4], float (&o)[HD / 8][4], float& ma, float& mb, float& la, float& lb) {
    float mxa = NEG_INF, mxb = NEG_INF;
#pragma unroll
    for (int nt = 0; nt < NK / 8; nt++) {
        mxa = fmaxf(mxa, fmaxf(sf[nt][0], sf[nt][1]));
        mxb = fmaxf(mxb, fmaxf(sf[nt][2], sf[nt][3]));
    }
    mxa = fmaxf(mxa, __shfl_xor_sync(0xffffffffu, mxa, 1));
    mxa = fmaxf(mxa, __shfl_xor_sync(0xffffffffu, mxa, 2));
    mxb = fmaxf(mxb, __shfl_xor_sync(0xffffffffu, mxb, 1));
    mxb = fmaxf(mxb, __shfl_xor_sync(0xffffffffu, mxb, 2));
    const float na = fmaxf(ma, mxa), nb = fmaxf(mb, mxb);
    // A row with no key yet keeps max -inf: use 0 so exp2 gives 0, not NaN.
    const float ua = na == NEG_INF ? 0.f : na, ub = nb == NEG_INF ? 0.f : nb;
    const float ca = fa_exp2(ma - ua), cb = fa_exp2(mb - ub);
    ma = na, mb = nb;
    // Once the maxima settle (after the first tiles, or at an attention
    // sink) no row moves: skip the HD/2 multiplies (x * 1 == x exactly).
    if (__any_sync(0xffffffffu, ca != 1.f || cb != 1.f)) {
        la *= ca, lb *= cb;
#pragma unroll
        for (int i = 0; i < HD / 8; i++) o[i][0] *= ca, o[i][1] *= ca, o[i][2] *= cb, o[i][3] *= cb;
    }
#pragma unroll
    for (int nt = 0; nt < NK / 8; nt++) {
        sf[nt][0] = fa_exp2(sf[nt][0] - ua), sf[nt][1] = fa_exp2(sf[nt][1] - ua);
        sf[nt][2] = fa_exp2(sf[nt][2] - ub), sf[nt][3] = fa_exp2(sf[nt][3] - ub);
        la += sf[nt][0] + sf[nt][1], lb += sf[nt][2] + sf[nt][3];
    }
}
// fa_pack makes P's A fragments, one per 16-key step of PV.
template <int NK>
DEV void fa_pack(u32 (&pf)[NK / 16][4], const float (&sf)[NK / 8][4]) {
#pragma unroll
    for (int kc = 0; kc < NK / 16; kc++) {
        pf[kc][0] = f16x2(sf[2 * kc][0], sf[2 * kc][1]), pf[kc][1] = f16x2(sf[2 * kc][2], sf[2 * kc][3]);
        pf[kc][2] = f16x2(sf[2 * kc + 1][0], sf[2 * kc + 1][1]);
        pf[kc][3] = f16x2(sf[2 * kc + 1][2], sf[2 * kc + 1][3]);
    }
}
// fa_store normalises and writes rows ra and ra + 8 (those before cnt),
// dims 0..DO-1 of the head from out (which a caller owning other dims
// offsets). sk: the head's attention sink in base-2 units (NEG_INF: none),
// one more softmax column against the rows' maxima ma and mb.
template <int HD, int DO = HD>
DEV void fa_store(float* out, const float (&o)[DO / 8][4], float la, float lb, float ma, float mb, float sk, int r0, int ra,
                  int cnt, int ldo, int h) {
    la += __shfl_xor_sync(0xffffffffu, la, 1);
    la += __shfl_xor_sync(0xffffffffu, la, 2);
    lb += __shfl_xor_sync(0xffffffffu, lb, 1);
    lb += __shfl_xor_sync(0xffffffffu, lb, 2);
    if (sk != NEG_INF) la += fa_exp2(sk - ma), lb += fa_exp2(sk - mb);
    const float ia = la > 0.f ? 1.f / la : 0.f, ib = lb > 0.f ? 1.f / lb : 0.f;
    const int rb = ra + 8, t = threadIdx.x & 3;
    float* oa = out + (long long)(r0 + ra) * ldo + h * HD;
    float* ob = out + (long long)(r0 + rb) * ldo + h * HD;
#pragma unroll
    for (int nd = 0; nd < DO / 8; nd++) {
        const int d = nd * 8 + 2 * t;
        if (ra < cnt) *reinterpret_cast<float2*>(oa + d) = f2(o[nd][0] * ia, o[nd][1] * ia);
        if (rb < cnt) *reinterpret_cast<float2*>(ob + d) = f2(o[nd][2] * ib, o[nd][3] * ib);
    }
}


// flash2's shape per head dim (f2cfg): W warps; a warp group of NS warps
// owns 16*M query rows; keys come in tiles of KT (two stages in shared
// memory), worked in steps of KH. With NS > 1 each warp of the group owns
// HD/NS dims of O and sums its share of S = QK^T over those dims; the
// group adds the shares through shared memory (fa_xsum).
//   HD 64, 128: 4 warps of 32 rows (S of 32 rows x 64 keys would hold 64
//     registers next to O's 128 at HD 128 and spill: steps of 32 keys).
//   HD 256: 8 warps of 16 rows (O: 128 registers), steps of 64 keys.
//   HD 512: 8 warps, pairs of 16 rows x 256 dims, so 64 rows a block (O
//     of 128 rows x 512 dims would fill an SM's whole register file) and
//     two blocks per query tile; tiles of 32 keys (two stages of 64 keys
//     would not fit next to Q).
// flash2Geom in backend.go mirrors these.
template <int HD>
struct f2cfg {
    static constexpr int W = F2_W, M = 2, NS = 1, KT = FA_KT, KH = 32;
};
template <>
struct f2cfg<256> {
    static constexpr int W = 8, M = 1, NS = 1, KT = 64, KH = 64;
};
template <>
struct f2cfg<512> {
    static constexpr int W = 8, M = 1, NS = 2, KT = 32, KH = 32;
};
#define FA_KH 32
// S = Q K^T (or, NS > 1, a DS-dim share of it) for a warp's M m-tiles over
// NK keys: A fragments of Q from the padded Q rows at qa (m-tile m 16*m
// rows below), B fragments of K from the padded key rows at kl (both at
// the warp's first dim). Steps s = (dim chunk kc, key pair np); each K
// fragment feeds 2*M mma.
template <int HD, int M = 2, int NK = FA_KH, int DS = HD>
DEV void fa2_qk(float (&sf)[M][NK / 8][4], u32 qa, u32 kl) {
    constexpr int NP = NK / 16, NS = DS / 16 * NP, QM = 16 * (HD + 8) * 2;
#pragma unroll
    for (int m = 0; m < M; m++)
#pragma unroll
        for (int nt = 0; nt < NK / 8; nt++) sf[m][nt][0] = sf[m][nt][1] = sf[m][nt][2] = sf[m][nt][3] = 0.f;
    u32 a[M][4], b[4];
#pragma unroll
    for (int s = 0; s < NS; s++) {
        const int kc = s / NP, np = s % NP;
        if (np == 0)
#pragma unroll
            for (int m = 0; m < M; m++) fa_ldsm(a[m], qa + m * QM + kc * 32);
        fa_ldsm(b, kl + (np * 16 * (HD + 8) + kc * 16) * 2);
#pragma unroll
        for (int m = 0; m < M; m++) {
            mma_f16(sf[m][2 * np], a[m][0], a[m][1], a[m][2], a[m][3], b[0], b[1]);
            mma_f16(sf[m][2 * np + 1], a[m][0], a[m][1], a[m][2], a[m][3], b[2], b[3]);
        }
    }
}
// O += P V for the M m-tiles over NK keys and the DO dims the warp owns,
// V fragments from the padded key rows at vl (at the warp's first dim);
// steps s = (key chunk kc, dim pair dp).
template <int HD, int M = 2, int NK = FA_KH, int DO = HD>
DEV void fa2_pv(float (&o)[M][DO / 8][4], const u32 (&pf)[M][NK / 16][4], u32 vl) {
    constexpr int NS = NK / 16 * (DO / 16);
    u32 b[4];
#pragma unroll
    for (int s = 0; s < NS; s++) {
        const int kc = s / (DO / 16), dp = s % (DO / 16);
        fa_ldsm_t(b, vl + fa_voff<HD, DO>(s));
#pragma unroll
        for (int m = 0; m < M; m++) {
            const u32(&y)[4] = pf[m][kc];
            mma_f16(o[m][2 * dp], y[0], y[1], y[2], y[3], b[0], b[1]);
            mma_f16(o[m][2 * dp + 1], y[0], y[1], y[2], y[3], b[2], b[3]);
        }
    }
}
DEV void fa_bar(int id, int n) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory"); }
// fa_xsum adds the partner's share of S (the same rows, the other dims)
// to this warp's, through shared memory: this lane's fragments at xw
// (float4 per fragment, a fragment's 32 lanes contiguous: conflict-free),
// the partner's same lane at xp. Named barrier bar of the pair's 64
// threads: the first waits until the partner has read the previous
// exchange, the second until it has written this one. Both warps get the
// same sums (a + b == b + a), so their softmaxes agree bit for bit.
template <int M, int NK>
DEV void fa_xsum(float (&sf)[M][NK / 8][4], float4* xw, const float4* xp, int bar) {
    fa_bar(bar, 64);
#pragma unroll
    for (int m = 0; m < M; m++)
#pragma unroll
        for (int nt = 0; nt < NK / 8; nt++) {
            const float4 v = {sf[m][nt][0], sf[m][nt][1], sf[m][nt][2], sf[m][nt][3]};
            xw[(m * (NK / 8) + nt) * 32] = v;
        }
    fa_bar(bar, 64);
#pragma unroll
    for (int m = 0; m < M; m++)
#pragma unroll
        for (int nt = 0; nt < NK / 8; nt++) {
            const float4 v = xp[(m * (NK / 8) + nt) * 32];
            sf[m][nt][0] += v.x, sf[m][nt][1] += v.y, sf[m][nt][2] += v.z, sf[m][nt][3] += v.w;
        }
}

// Dynamic shared memory of flash2 (flash2Smem in backend.go): Q, then two
// stages of a K tile and a V tile, all padded rows; with NS > 1 then the
// exchange slots, one per warp. Over an E4M3 cache (KV KvF8) the second
// stage holds instead two stages of code tiles (unpadded rows of HD bytes:
// they fit), copied by cp.async a tile ahead as f16 tiles are, and each
// tile is widened into the first stage between two barriers.
template <int HD, class KV = KvF16>
DEV void flash2_impl(float* out, const float* q, const typename KV::T* Kc, const typename KV::T* Vc, const int* pos,
                     const int* tok2seq,
                     const int* btab, int btStride, int bs, int heads, int kvh, float scale, int window, float softcap,
                     const int* tiles, int ldq, int ldo, const float* sinks) {
    using C = f2cfg<HD>;
    constexpr int M = C::M, NS = C::NS, KT = C::KT, KH = C::KH, NT = C::W * 32;
    constexpr int RW = 16 * M, R = C::W / NS * RW, SUB = FA_ROWS / R; // rows: a warp group's, the block's; blocks a tile
    constexpr int DW = HD / NS;                                       // dims of a warp (its share of S and its O)
    constexpr int KS = HD + 8, TB = KT * KS * 2;                      // padded row (halves), tile bytes
    constexpr bool F8 = KV::F8;
    constexpr int RH = F8 ? HD / 2 : HD, RS = F8 ? RH : KS, RB = KT * HD; // copy shape; fp8: code tile bytes
    static_assert(!F8 || 4 * RB <= 2 * TB, "two stages of K and V code tiles fit in the second f16 stage");
    static_assert(R * SUB == FA_ROWS && NT % (HD / 8) == 0 && KT % KH == 0 && NS <= 2, "flash2 shape");
    extern __shared__ __align__(16) u16 fsm[];
    const fa_blk B = fa_block<SUB>(pos, tok2seq, btab, btStride, heads, kvh, window, tiles);
    if (SUB > 1 && B.cnt <= 0) return; // block-uniform, before any barrier
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = warp / NS, d = warp % NS;
    const int cnt = B.cnt, pfirst = B.pfirst, plast = B.plast;
    const u32 qsm = fa_smem(fsm), kv = qsm + R * KS * 2; // stage st: K at kv + 2*TB*st, V after it
    // fp8: the code tiles of the tile whose f16 stage would be s (0 or 2*TB).
    auto raw = [&](u32 s) { return kv + 2 * TB + (s ? 2 * RB : 0); };

    int row[FA_NK(RH, NT, KT)]; // cache rows of the next tile to copy
    fa_rows<RH, NT, KT>(row, B.bt, B.kstart, plast, bs, kvh, B.kh);
    fa_copy<RH, NT, KT, RS>(F8 ? raw(0) : kv, Kc, row);
    fa_copy<RH, NT, KT, RS>(F8 ? raw(0) + RB : kv + TB, Vc, row);
    fa_commit();

    // Q rows to f16 in shared memory, pre-scaled; rows past cnt are zeros.
    // Visible to all after the first barrier of the loop.
    {
        constexpr int CH = HD / 8, RP = NT / CH; // 8-dim chunks a row, rows a pass
        const float qs = softcap > 0.f ? scale : scale * LOG2E;
        const int c = threadIdx.x % CH;
#pragma unroll 4
        for (int i = 0; i < R / RP; i++) {
            const int r = (int)threadIdx.x / CH + i * RP;
            float4 x = {0.f, 0.f, 0.f, 0.f}, y = {0.f, 0.f, 0.f, 0.f};
            if (r < cnt) {
                const float4* src = reinterpret_cast<const float4*>(q + (long long)(B.r0 + r) * ldq + B.h * HD + c * 8);
                x = src[0], y = src[1];
            }
            uint4 v;
            v.x = f16x2(x.x * qs, x.y * qs), v.y = f16x2(x.z * qs, x.w * qs);
            v.z = f16x2(y.x * qs, y.y * qs), v.w = f16x2(y.z * qs, y.w * qs);
            *reinterpret_cast<uint4*>(fsm + r * KS + c * 8) = v;
        }
    }

    // This warp group's rows: w0..w0+RW-1 at positions pw0..pwl (pwl: the
    // last row before cnt; -1 when the group has none, so it skips every
    // tile). Its warps make the same choices, as fa_xsum's barriers need.
    const int w0 = g * RW, pw0 = pfirst + w0, pwl = w0 < cnt ? pfirst + min(w0 + RW - 1, cnt - 1) : -1;
    // ldmatrix addresses of this lane at the warp's first dim: Q rows (A,
    // x4 = {rows 0-7, 8-15} x {dims 0-7, 8-15}), K and V in stage 0.
    const u32 qa = qsm + ((w0 + (lane & 7) + ((lane >> 3) & 1) * 8) * KS + (lane >> 4) * 8 + d * DW) * 2;
    const u32 kl = kv + fa_klane<HD>(lane) + d * DW * 2, vl = kv + TB + fa_vlane<HD>(lane) + d * DW * 2;
    float o[M][DW / 8][4];
#pragma unroll
    for (int m = 0; m < M; m++)
#pragma unroll
        for (int i = 0; i < DW / 8; i++) o[m][i][0] = o[m][i][1] = o[m][i][2] = o[m][i][3] = 0.f;
    float mx[M][2], l[M][2];
#pragma unroll
    for (int m = 0; m < M; m++) mx[m][0] = mx[m][1] = NEG_INF, l[m][0] = l[m][1] = 0.f;

    u32 so = 0; // this tile's stage offset
    for (int j0 = B.kstart; j0 <= plast; j0 += KT, so ^= 2 * TB) {
        const bool more = j0 + KT <= plast;
        // The next tile's rows: the lookups' latency hides behind the wait.
        if (more) fa_rows<RH, NT, KT>(row, B.bt, j0 + KT, plast, bs, kvh, B.kh);
        fa_wait0(); // this thread's copies of tile j0 have landed...
        __syncthreads(); // ...and everyone's; every warp is done with the other stage (tile j0 - KT)
        if (more) {
            const u32 nx = F8 ? raw(so ^ 2 * TB) : kv + (so ^ 2 * TB);
            fa_copy<RH, NT, KT, RS>(nx, Kc, row);
            fa_copy<RH, NT, KT, RS>(nx + (F8 ? RB : TB), Vc, row);
            fa_commit();
        }
        if constexpr (F8) { // widen tile j0 into the f16 stage, which every warp is done with
            fa_widen<HD, NT, KT>(reinterpret_cast<char*>(fsm), kv - qsm, raw(so) - qsm, threadIdx.x);
            __syncthreads();
        }
        const u32 cs = F8 ? 0 : so; // the f16 stage of tile j0
#pragma unroll
        for (int hk = 0; hk < KT / KH; hk++) {
            const int jh = j0 + hk * KH;
            // Skip keys no row of this warp group sees (group-uniform):
            // all after its last row, or all before its first row's window.
            if (jh > pwl || (window > 0 && jh + KH - 1 <= pw0 - window)) continue;
            const u32 ho = cs + hk * KH * KS * 2;
            float sf[M][KH / 8][4];
            fa2_qk<HD, M, KH, DW>(sf, qa, kl + ho);
            if constexpr (NS > 1) {
                // Exchange slots after the tiles: this warp's, its partner's (warp ^ 1).
                float4* const xs = reinterpret_cast<float4*>(fsm + (R + 4 * KT) * KS) + lane;
                fa_xsum<M, KH>(sf, xs + warp * (M * KH / 8 * 32), xs + (warp ^ 1) * (M * KH / 8 * 32), 1 + g);
            }
            // Masks only where some key is past the group's first row or
            // before its last row's window.
            const bool mask = jh + KH - 1 > pw0 || (window > 0 && jh <= pwl - window);
            u32 pf[M][KH / 16][4];
#pragma unroll
            for (int m = 0; m < M; m++) {
                fa_mods<KH>(sf[m], softcap, mask, jh, pfirst, w0 + m * 16 + (lane >> 2), cnt, window);
                fa_softmax<DW, KH>(sf[m], o[m], mx[m][0], mx[m][1], l[m][0], l[m][1]);
                fa_pack<KH>(pf[m], sf[m]);
            }
            fa2_pv<HD, M, KH, DW>(o, pf, vl + ho);
        }
    }
    // Read the tile again rather than hold r0 and h in registers through the loop.
    const fa_blk E = fa_block<SUB>(pos, tok2seq, btab, btStride, heads, kvh, window, tiles);
    // The sink joins in the scores' base-2 units (Q was scaled by log2 e).
    const float sk = sinks ? sinks[E.h] * LOG2E : NEG_INF;
#pragma unroll
    for (int m = 0; m < M; m++)
        fa_store<HD, DW>(out + d * DW, o[m], l[m][0], l[m][1], mx[m][0], mx[m][1], sk, E.r0, w0 + m * 16 + (lane >> 2), cnt,
                         ldo, E.h);
}

// Kc, Vc: the layer's paged cache, [block][kvHead][slot][HD], f16 (or
// E4M3 codes, SFX _f8). Grid (query tiles, heads); F2_T threads and
// flash2Smem bytes of dynamic shared memory (HD 256 and 512: 256 threads,
// and for HD 512 grid x = 2 * query tiles).
#define FLASH(NAME, IMPL, NT, HD, MINB, SFX, KV)                                                                      \
    extern "C" __global__ void __launch_bounds__(NT, MINB) NAME##_##HD##SFX(                                        \
        float* out, const float* q, const KV::T* Kc, const KV::T* Vc, const int* pos, const int* tok2seq,            \
        const int* btab, int btStride, int bs, int heads, int kvh, float scale, int window, float softcap,           \
        const int* tiles, int ldq, int ldo, const float* sinks) {                                                    \
        grid_dep_start();                                                                                             \
        IMPL<HD, KV>(out, q, Kc, Vc, pos, tok2seq, btab, btStride, bs, heads, kvh, scale, window, softcap, tiles, ldq, \
                     ldo, sinks);                                                                                     \
    }
#define FLASH2(SFX, KV)                                                                                               \
    FLASH(flash2_attn, flash2_impl, F2_T, 64, 2, SFX, KV) FLASH(flash2_attn, flash2_impl, F2_T, 128, 2, SFX, KV)     \
    FLASH(flash2_attn, flash2_impl, 256, 256, 1, SFX, KV) FLASH(flash2_attn, flash2_impl, 256, 512, 1, SFX, KV)
FLASH2(, KvF16) FLASH2(_f8, KvF8)
