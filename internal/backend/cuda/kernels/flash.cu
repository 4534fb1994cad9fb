// Flash attention for prefill on the tensor cores (mma.m16n8k16, f16
// operands, f32 accumulation), after kv_store has written the step's keys
// and values into the paged f16 cache. FlashAttention-2 structure.
//
// A block takes FA_ROWS = 128 consecutive query rows of one sequence and
// one head (8 warps of 16 rows; flashTile in step.go) and walks the keys
// in tiles of 64 that all warps share through shared memory: each K or V
// tile is read from L2 once per 128 queries. S = QK^T, the online softmax
// and O = PV stay in registers; Q's A fragments are built once.
//
// Tiles arrive by 16-byte cp.async straight from the paged cache (a key's
// row is HD f16 contiguous), so no thread waits on a load: one K buffer
// and one V buffer, staggered as in FlashAttention-2: V(j) loads while
// S(j) = Q K(j)^T runs, K(j+1) loads while the softmax and P V(j) run.
// Three barriers per tile. (Double-buffering both needs 68 KB for HD 128,
// over the 48 KB of static shared memory.)
//
// B fragments come from the row-major tiles by ldmatrix: K non-transposed
// (key rows, dims contiguous = the .col B operand of S), V with .trans
// (the .col B operand of PV wants dims as columns). Rows are padded by 16
// bytes (HD + 8 halves): the 8 row addresses of one 8x8 matrix then fall
// in 8 distinct 16-byte bank groups, conflict-free, and 16-byte aligned
// for cp.async.
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
// Limits: head dims 64 and 128 (register budget); others use the generic
// kernel. Q must fit f16 (|x| < 65504), true of post-norm activations.

#define FA_KT 64             // keys per tile
#define FA_W 8               // warps per block, 16 query rows each
#define FA_T (FA_W * 32)     // threads per block (the launch in ops.go)
#define FA_ROWS (FA_W * 16)  // query rows per block (flashTile in step.go)
#define LOG2E 1.4426950408889634f

DEV float2 f2(float a, float b) {
    float2 r;
    r.x = a, r.y = b;
    return r;
}
DEV u32 fa_smem(const void* p) {
    u32 a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}
// fa_cp16 copies 16 bytes global -> shared, or writes 16 zero bytes when
// n is 0 (src is then not read).
DEV void fa_cp16(u32 dst, const void* src, int n) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(n) : "memory");
}
DEV void fa_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
DEV void fa_wait1() { asm volatile("cp.async.wait_group 1;" ::: "memory"); }
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

// A tile is copied by FA_T threads, FA_N 16-byte chunks each: thread x
// takes chunk x % CH of rows x / CH + i * FA_T / CH (CH = HD / 8 chunks a
// row). Consecutive threads take consecutive chunks of a row: coalesced
// reads, and each 8 chunks cover the 32 banks once.
#define FA_N(HD) (FA_KT * (HD) / 8 / FA_T)

// fa_rows finds, for keys j0.. of the thread's FA_N tile rows, the cache
// row ((block * kvh + kh) * bs + slot) or -1 past plast. K and V tiles of
// the same keys share it, so the block-table lookups happen once per tile.
template <int HD>
DEV void fa_rows(int (&row)[FA_N(HD)], const int* bt, int j0, int plast, int bs, int kvh, int kh) {
#pragma unroll
    for (int i = 0; i < FA_N(HD); i++) {
        const int j = j0 + (int)threadIdx.x / (HD / 8) + i * (FA_T / (HD / 8));
        const unsigned jc = min(j, plast); // clamped: every lookup is in the table, none branches
        const int blk = bt[jc / (unsigned)bs];
        row[i] = j <= plast ? (blk * kvh + kh) * bs + (int)(jc % (unsigned)bs) : -1;
    }
}
// fa_copy starts the copy of one tile into the padded tile at shared
// address dst; rows past the end become zeros (P is 0 there, but 0 *
// stale garbage could be NaN).
template <int HD>
DEV void fa_copy(u32 dst, const u16* cache, const int (&row)[FA_N(HD)]) {
    constexpr int CH = HD / 8;
    const int c = threadIdx.x % CH;
#pragma unroll
    for (int i = 0; i < FA_N(HD); i++) {
        const int r = (int)threadIdx.x / CH + i * (FA_T / CH);
        const u16* src = row[i] >= 0 ? cache + (long long)row[i] * HD + c * 8 : cache;
        fa_cp16(dst + (r * (HD + 8) + c * 8) * 2, src, row[i] >= 0 ? 16 : 0);
    }
}

// Byte offsets in a padded tile of the 16x16 blocks ldmatrix reads at QK
// step s (dims (s / 4) * 16, keys (s % 4) * 16) and PV step s (keys
// (s / (HD / 16)) * 16, dims (s % (HD / 16)) * 16).
template <int HD>
DEV constexpr u32 fa_koff(int s) { return ((s % (FA_KT / 16)) * 16 * (HD + 8) + (s / (FA_KT / 16)) * 16) * 2; }
template <int HD>
DEV constexpr u32 fa_voff(int s) { return ((s / (HD / 16)) * 16 * (HD + 8) + (s % (HD / 16)) * 16) * 2; }

template <int HD>
DEV void flash_impl(float* out, const float* q, const u16* Kc, const u16* Vc, const int* pos, const int* tok2seq,
                    const int* btab, int btStride, int bs, int heads, int kvh, float scale, int window, float softcap,
                    const int* tiles, int ldq, int ldo) {
    constexpr int KS = HD + 8; // padded row, in halves
    __shared__ __align__(16) u16 kvs[2 * FA_KT * KS]; // K tile, then V tile
    const int lin = blockIdx.x + blockIdx.y * gridDim.x;
    const int h = lin % heads, tile = gridDim.x - 1 - lin / heads;
    const int r0 = tiles[2 * tile], cnt = tiles[2 * tile + 1];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int kh = h / (heads / kvh);
    const int* bt = btab + (long long)tok2seq[r0] * btStride;
    const int pfirst = pos[r0], plast = pos[r0 + cnt - 1];
    const int ra = warp * 16 + g, rb = ra + 8; // this thread's two query rows in the tile
    const bool rows = warp * 16 < cnt; // warp-uniform, as mma.sync needs
    const float qs = softcap > 0.f ? scale : scale * LOG2E;
    const u32 ks = fa_smem(kvs), vs = ks + FA_KT * KS * 2;
    // ldmatrix row addresses of this lane (matrix lane/8, row lane%8).
    // K, x4 = {keys 0-7, 8-15} x {dims 0-7, 8-15} of a 16x16 block:
    // b0, b1 of key 8-tile nt, then b0, b1 of nt+1.
    const u32 kl = ks + (((lane >> 4) * 8 + (lane & 7)) * KS + ((lane >> 3) & 1) * 8) * 2;
    // V, x4 .trans = {dims 0-7, 8-15} x {keys 0-7, 8-15}: b0, b1 of dim
    // 8-tile nd, then b0, b1 of nd+1.
    const u32 vl = vs + ((((lane >> 3) & 1) * 8 + (lane & 7)) * KS + (lane >> 4) * 8) * 2;

    const int kstart = window > 0 ? max(0, pfirst - window + 1) : 0;
    int row[FA_N(HD)]; // cache rows of the next tile to copy
    fa_rows<HD>(row, bt, kstart, plast, bs, kvh, kh);
    fa_copy<HD>(ks, Kc, row);
    fa_commit();

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

    for (int j0 = kstart; j0 <= plast; j0 += FA_KT) {
        __syncthreads(); // every warp is done with the previous V tile
        fa_copy<HD>(vs, Vc, row);
        fa_commit();
        // The next tile's rows: the lookups' latency hides behind the wait.
        if (j0 + FA_KT <= plast) fa_rows<HD>(row, bt, j0 + FA_KT, plast, bs, kvh, kh);
        fa_wait1(); // this thread's K(j0) copies have landed...
        __syncthreads(); // ...and everyone's

        float sf[FA_KT / 8][4];
#pragma unroll
        for (int nt = 0; nt < FA_KT / 8; nt++) sf[nt][0] = sf[nt][1] = sf[nt][2] = sf[nt][3] = 0.f;
        if (rows) {
            // ldmatrix runs two steps ahead of the mma that uses it (its
            // latency is ~30 cycles and a warp has nothing else to do):
            // step s = (dim chunk kc, key pair np).
            constexpr int NS = HD / 16 * (FA_KT / 16);
            u32 b[3][4];
            fa_ldsm(b[0], kl + fa_koff<HD>(0));
            fa_ldsm(b[1], kl + fa_koff<HD>(1));
#pragma unroll
            for (int s = 0; s < NS; s++) {
                if (s + 2 < NS) fa_ldsm(b[(s + 2) % 3], kl + fa_koff<HD>(s + 2));
                const int kc = s / (FA_KT / 16), np = s % (FA_KT / 16);
                mma_f16(sf[2 * np], qf[kc][0], qf[kc][1], qf[kc][2], qf[kc][3], b[s % 3][0], b[s % 3][1]);
                mma_f16(sf[2 * np + 1], qf[kc][0], qf[kc][1], qf[kc][2], qf[kc][3], b[s % 3][2], b[s % 3][3]);
            }
        }
        __syncthreads(); // every warp is done with K(j0)
        if (j0 + FA_KT <= plast) fa_copy<HD>(ks, Kc, row);
        fa_commit(); // possibly empty: keeps one group per stage

        if (rows) {
            if (softcap > 0.f) {
                const float ics = 1.f / softcap;
#pragma unroll
                for (int nt = 0; nt < FA_KT / 8; nt++)
#pragma unroll
                    for (int i = 0; i < 4; i++) sf[nt][i] = softcap * tanhf(sf[nt][i] * ics) * LOG2E;
            }
            // Masks only where some key of the tile is past the first
            // row's position or before the last row's window.
            if (j0 + FA_KT - 1 > pfirst || (window > 0 && j0 <= plast - window)) {
#pragma unroll
                for (int nt = 0; nt < FA_KT / 8; nt++)
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        // Positions are consecutive within a tile (ops.go checks b.step.consecutive).
                        const int r = i < 2 ? ra : rb, p = pfirst + r, j = j0 + nt * 8 + 2 * t + (i & 1);
                        const bool ok = r < cnt && j <= p && (window <= 0 || j > p - window);
                        sf[nt][i] = ok ? sf[nt][i] : NEG_INF;
                    }
            }
            float mxa = NEG_INF, mxb = NEG_INF;
#pragma unroll
            for (int nt = 0; nt < FA_KT / 8; nt++) {
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
            la *= ca, lb *= cb;
#pragma unroll
            for (int i = 0; i < HD / 8; i++) o[i][0] *= ca, o[i][1] *= ca, o[i][2] *= cb, o[i][3] *= cb;
#pragma unroll
            for (int nt = 0; nt < FA_KT / 8; nt++) {
                sf[nt][0] = fa_exp2(sf[nt][0] - ua), sf[nt][1] = fa_exp2(sf[nt][1] - ua);
                sf[nt][2] = fa_exp2(sf[nt][2] - ub), sf[nt][3] = fa_exp2(sf[nt][3] - ub);
                la += sf[nt][0] + sf[nt][1], lb += sf[nt][2] + sf[nt][3];
            }
        }
        fa_wait1(); // V(j0) has landed (only K(j0+FA_KT) may be pending)
        __syncthreads();
        if (rows) {
            // O += P V; step s = (key chunk kc, dim pair dp), ldmatrix two
            // steps ahead as above.
            u32 pf[FA_KT / 16][4];
#pragma unroll
            for (int kc = 0; kc < FA_KT / 16; kc++) {
                pf[kc][0] = f16x2(sf[2 * kc][0], sf[2 * kc][1]), pf[kc][1] = f16x2(sf[2 * kc][2], sf[2 * kc][3]);
                pf[kc][2] = f16x2(sf[2 * kc + 1][0], sf[2 * kc + 1][1]);
                pf[kc][3] = f16x2(sf[2 * kc + 1][2], sf[2 * kc + 1][3]);
            }
            constexpr int NS = FA_KT / 16 * (HD / 16);
            u32 b[3][4];
            fa_ldsm_t(b[0], vl + fa_voff<HD>(0));
            fa_ldsm_t(b[1], vl + fa_voff<HD>(1));
#pragma unroll
            for (int s = 0; s < NS; s++) {
                if (s + 2 < NS) fa_ldsm_t(b[(s + 2) % 3], vl + fa_voff<HD>(s + 2));
                const int kc = s / (HD / 16), dp = s % (HD / 16);
                mma_f16(o[2 * dp], pf[kc][0], pf[kc][1], pf[kc][2], pf[kc][3], b[s % 3][0], b[s % 3][1]);
                mma_f16(o[2 * dp + 1], pf[kc][0], pf[kc][1], pf[kc][2], pf[kc][3], b[s % 3][2], b[s % 3][3]);
            }
        }
    }
    la += __shfl_xor_sync(0xffffffffu, la, 1);
    la += __shfl_xor_sync(0xffffffffu, la, 2);
    lb += __shfl_xor_sync(0xffffffffu, lb, 1);
    lb += __shfl_xor_sync(0xffffffffu, lb, 2);
    const float ia = la > 0.f ? 1.f / la : 0.f, ib = lb > 0.f ? 1.f / lb : 0.f;
    float* oa = out + (long long)(r0 + ra) * ldo + h * HD;
    float* ob = out + (long long)(r0 + rb) * ldo + h * HD;
#pragma unroll
    for (int nd = 0; nd < HD / 8; nd++) {
        const int d = nd * 8 + 2 * t;
        if (ra < cnt) *reinterpret_cast<float2*>(oa + d) = f2(o[nd][0] * ia, o[nd][1] * ia);
        if (rb < cnt) *reinterpret_cast<float2*>(ob + d) = f2(o[nd][2] * ib, o[nd][3] * ib);
    }
}
// Kc, Vc: the layer's paged f16 cache, [block][kvHead][slot][HD]. Grid
// (query tiles, heads), FA_T threads.
#define FLASH(HD, MINB)                                                                                               \
    extern "C" __global__ void __launch_bounds__(FA_T, MINB) flash_attn_##HD(                                        \
        float* out, const float* q, const u16* Kc, const u16* Vc, const int* pos, const int* tok2seq,                \
        const int* btab, int btStride, int bs, int heads, int kvh, float scale, int window, float softcap,           \
        const int* tiles, int ldq, int ldo) {                                                                        \
        grid_dep_start();                                                                                             \
        flash_impl<HD>(out, q, Kc, Vc, pos, tok2seq, btab, btStride, bs, heads, kvh, scale, window, softcap, tiles,   \
                       ldq, ldo);                                                                                     \
    }
FLASH(64, 2) FLASH(128, 1)
