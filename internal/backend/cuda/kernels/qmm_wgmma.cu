// qmmw: the many-row 4-bit product (qmm.cu's job: y[M, N] = x[M, K] @ W^T,
// MLX affine 4-bit W with bf16 scale/bias pairs, groups of 16 to 128,
// K % 64 == 0, x as bf16 [M, K]) for 65-128 activation rows on Hopper's
// warpgroup MMA. qmm4 feeds
// mma.sync from registers: every 8 activation rows cost each warp a
// shared-memory load of their fragments per 16x16 weights, the weights
// come straight from global memory with two slabs in flight a warp, and at
// 128 rows it reads each weight twice (two 64-row tiles) at ~0.06-0.10 of
// the copy rate (notes/cuda-session-15.md). Here, 1.3-1.55x faster on the
// Llama shapes at 128 rows:
// - the weights and scales of a 64-wide K slab land in shared memory by
//   cp.async and its x by one TMA copy (cp.async.bulk.tensor through a
//   tensor map, tensormap.go: 128-byte swizzled, rows past M zero), a ring
//   of slabs (several slabs of every block in flight without registers);
// - each warpgroup (4 warps, 64 weight rows) dequantizes its rows' slab
//   from shared memory into registers, in the A layout of
//   wgmma.m64nBNk16 (per warp that of mma.m16n8k16: rows g and g+8, k 2t,
//   2t+1 and 2t+8, 2t+9), and the tensor cores read x, the B operand,
//   straight from shared memory: all 128 activation rows of the tile in
//   one instruction, nothing loaded by the threads;
// - the MMAs run asynchronously: slab s+1 is dequantized while slab s's
//   are in the tensor cores (two register sets of A fragments).
// The split-K cluster and the epilogue are qmm4's (qmm_store_tile).
//
// Numbers: as qmm4, each weight is q*s+b rounded once to bf16 (the weight
// the bf16 cuBLAS path multiplies), products accumulate in f32.
//
// Shared memory of a slab (one ring slot), x first:
// - W: QMM_BN rows x 32 bytes; row r's two 16-byte halves swapped when
//   bit 2 of r is set, so the 8 rows a warp reads at once hit distinct banks.
// - X: BN rows of 128 bytes (64 k) as the TMA writes them with the 128-byte
//   swizzle (16-byte chunk c of row r at chunk c ^ (r % 8)): the K-major
//   canonical layout of the wgmma B operand with that swizzle, 8-row groups
//   1024 bytes apart; 1024-byte aligned. (x by 16-byte cp.async into the
//   no-swizzle layout, with or without fence.proxy.async, was slower: s15b.)
// - SC: the scale/bias words of the slab, 4 a row (groups of 16; fewer used
//   for larger groups).

#define QMMW_THREADS 256 // two warpgroups of 64 weight rows: QMM_BN rows a block
#define QMMW_SCW 4       // scale words a row and slab in the ring (groups of 16)

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
DEV void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
DEV void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> DEV void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory"); }
#define WG_ARCH 1
#else
DEV void wg_fence() {}
DEV void wg_commit() {}
template <int N> DEV void wg_wait() {}
#define WG_ARCH 0
#endif

// wg_desc is the shared-memory matrix descriptor of an operand at shared
// address a: start, leading and stride byte offsets in 16-byte units (bits
// 0-13, 16-29, 32-45), base offset 0; the caller ORs in the swizzle mode
// (bits 62-63: 1 is the 128-byte swizzle).
DEV u64 wg_desc(u32 a, u32 lbo, u32 sbo) {
    return (u64)((a & 0x3FFFFu) >> 4) | ((u64)(lbo >> 4) << 16) | ((u64)(sbo >> 4) << 32);
}

// The accumulator lists of wgmma.m64nNk16 (N/2 f32 registers a thread).
#define WG_D8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define WG_D32(i) WG_D8(i), WG_D8(i + 8), WG_D8(i + 16), WG_D8(i + 24)

// wg_mma<BN> adds A (64 x 16, registers) times B (16 x BN, descriptor) to
// d: one wgmma.mma_async (asynchronous: wg_commit, wg_wait).
template <int BN> DEV void wg_mma(float (&d)[BN / 2], const u32 (&a)[4], u64 desc);
template <> DEV void wg_mma<128>(float (&d)[64], const u32 (&a)[4], u64 desc) {
#if WG_ARCH
    asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
                 "{%64, %65, %66, %67}, %68, 1, 1, 1, 0;"
                 : WG_D32(0), WG_D32(32)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
#else
    __trap();
#endif
}
// wg_hold keeps the compiler from moving accesses of the accumulators
// across the asynchronous MMAs (only wg_wait orders them).
template <int R> DEV void wg_hold(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; i++) asm volatile("" : "+f"(d[i])::"memory");
}

DEV void cp_async4(u32 dst, const void* src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(dst), "l"(src) : "memory");
}
template <int N> DEV void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

// A ring slot: x's tile first (1024-byte aligned for the 128-byte swizzle:
// slots are multiples of 1024 bytes from an aligned base), the weights,
// the scales.
template <int BN> struct QmmwRing {
    static constexpr int X = BN * 128, W = QMM_BN * 32, SC = QMM_BN * QMMW_SCW * 4, SLOT = X + W + SC;
    static constexpr int XO = 0, WO = X, SCO = X + W;
    static_assert(SLOT % 1024 == 0, "slots keep the x tiles 1024-byte aligned");
};

// The mbarrier a ring slot's TMA copy completes (arrive with the expected
// bytes, the copy's complete_tx, waits on the phase parity).
DEV void mbar_init(u32 bar, u32 count) { asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory"); }
DEV void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
DEV void mbar_expect(u32 bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
DEV void mbar_wait(u32 bar, u32 parity) {
    asm volatile("{\n.reg .pred p;\nQMMW_WAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra QMMW_WAIT;\n}\n" ::"r"(bar),
                 "r"(parity)
                 : "memory");
}
// tma_load_2d copies the box at (c0 columns, c1 rows) of the tensor map at
// tmap (device memory) to shared address dst, completing on bar.
DEV void tma_load_2d(u32 dst, const void* tmap, int c0, int c1, u32 bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
                 "l"(tmap), "r"(c0), "r"(c1), "r"(bar)
                 : "memory");
}

// qmmw_dq is the two weights of byte t of word v (k 2t, 2t+1 of its 8) as
// the bf16 pair (q*s+b): the byte's nibbles moved to bits 0-3 and 16-19
// (one PRMT, one multiply), then qmm_dq.
DEV u32 qmmw_dq(u32 v, u32 sel, u32 s2, u32 b2) { return qmm_dq(__byte_perm(v, 0u, sel) * 0x1001u, s2, b2); }

// qmmw_frag builds this thread's A fragments of one slab for the four
// k16 steps from ring slot p (generic address slot): rows lr and lr+8 of
// the block (its warp's rows g and g+8). Step c's registers: row g, k 2t..
// of words 2c and 2c+1; row g+8 the same.
template <int BN>
DEV void qmmw_frag(u32 (&a)[4][4], const unsigned char* slot, int lr, int t, int gshift) {
    typedef QmmwRing<BN> R;
    const u32 sel = (u32)t | 0x4440u; // byte t, then zeros
    u32 wd[2][8], s2[2][4], b2[2][4];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int r = lr + 8 * h, sw = (r >> 2) & 1;
        const uint4 lo = *reinterpret_cast<const uint4*>(slot + R::WO + r * 32 + 16 * sw);
        const uint4 hi = *reinterpret_cast<const uint4*>(slot + R::WO + r * 32 + 16 * (1 - sw));
        wd[h][0] = lo.x, wd[h][1] = lo.y, wd[h][2] = lo.z, wd[h][3] = lo.w;
        wd[h][4] = hi.x, wd[h][5] = hi.y, wd[h][6] = hi.z, wd[h][7] = hi.w;
        const uint4 sc = *reinterpret_cast<const uint4*>(slot + R::SCO + r * QMMW_SCW * 4);
#pragma unroll
        for (int c = 0; c < 4; c++) {
            const int j = (16 * c) >> gshift; // the group of k 16c..16c+15
            const u32 v = j == 0 ? sc.x : j == 1 ? sc.y : j == 2 ? sc.z : sc.w;
            s2[h][c] = __byte_perm(v, 0u, 0x1010), b2[h][c] = __byte_perm(v, 0u, 0x3232);
        }
    }
#pragma unroll
    for (int c = 0; c < 4; c++) {
        a[c][0] = qmmw_dq(wd[0][2 * c], sel, s2[0][c], b2[0][c]);
        a[c][1] = qmmw_dq(wd[1][2 * c], sel, s2[1][c], b2[1][c]);
        a[c][2] = qmmw_dq(wd[0][2 * c + 1], sel, s2[0][c], b2[0][c]);
        a[c][3] = qmmw_dq(wd[1][2 * c + 1], sel, s2[1][c], b2[1][c]);
    }
}
// qmmw_keep tells the compiler the A fragments are read until here (the
// asynchronous MMAs that take them were waited for just before), so it
// gives the other register set different registers.
DEV void qmmw_keep(u32 (&a)[4][4]) {
#pragma unroll
    for (int c = 0; c < 4; c++)
#pragma unroll
        for (int j = 0; j < 4; j++) asm volatile("" : "+r"(a[c][j]));
}

// QMMW_PARAMS: qmm4's, and the tensor map of x's bf16 copy (QMMW_TMA).
#define QMMW_PARAMS QMM_PARAMS, const void* tmap

// qmmw_impl: a block is two warpgroups over QMM_BN weight rows and BN
// activation rows (grid x), grid y the weight-row blocks of up to three
// segments (QMM_PARAMS), grid z the split-K cluster. The ring holds ST
// slabs: ST-2 being copied, one in the MMAs of the slab before, one being
// dequantized.
template <int BN, int ST>
DEV void qmmw_impl(QMMW_PARAMS) {
    typedef QmmwRing<BN> R;
    constexpr int P = ST - 2, NB = BN / 8;
    extern __shared__ __align__(1024) unsigned char qmmw_raw[];
    float* y;
    const u32 *w, *sb;
    const float* bias;
    int N, by;
    QMM_SEGMENT(y, w, sb, bias, N, by);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int ns = K >> 6, m0 = blockIdx.x * BN, nblk = by * QMM_BN;
    const int S = gridDim.z, rank = blockIdx.z;
    const int s_begin = (int)((long long)ns * rank / S), nsl = (int)((long long)ns * (rank + 1) / S) - s_begin;
    // The ring from the first 1024-byte boundary; the slots' mbarriers after it.
    const u32 raw = fa_smem(qmmw_raw), ring = (raw + 1023u) & ~1023u;
    unsigned char* const smem = qmmw_raw + (ring - raw);
    const u32 bars = ring + ST * R::SLOT;
    const int tid = threadIdx.x, nw = K >> 3, ng = K >> gshift, nsc = max(1, 64 >> gshift);
    // One slab's weights and scales, or its x, into slot i % ST.
    auto issue_w = [&](int i) {
        const u32 p = ring + (i % ST) * R::SLOT;
        const int s = s_begin + i;
        {
            const int r = tid >> 1, h = tid & 1, row = min(nblk + r, N - 1);
            fa_cp16(p + R::WO + r * 32 + 16 * (h ^ ((r >> 2) & 1)), w + (long long)row * nw + s * 8 + h * 4, 16);
        }
        const int g0 = (s << 6) >> gshift;
        for (int e = tid; e < QMM_BN * nsc; e += QMMW_THREADS) {
            const int r = e / nsc, j = e - r * nsc, row = min(nblk + r, N - 1);
            cp_async4(p + R::SCO + (r * QMMW_SCW + j) * 4, sb + (long long)row * ng + g0 + j);
        }
    };
    auto issue_x = [&](int i) {
        if (tid == 0) {
            mbar_expect(bars + (i % ST) * 8, R::X);
            tma_load_2d(ring + (i % ST) * R::SLOT + R::XO, tmap, (s_begin + i) * 64, m0, bars + (i % ST) * 8);
        }
    };
    if (tid == 0) {
        for (int i = 0; i < ST; i++) mbar_init(bars + i * 8, 1);
        mbar_init_fence();
    }
    __syncthreads();
    // The weights are constant: the first slabs' copies start before the
    // wait for the kernel that writes x. cp.async groups: the weights and
    // scales of one slab each (empty past the end), so slab i's are complete
    // when at most P-1 groups remain; x's copies complete on the slots'
    // mbarriers.
    grid_dep_launch();
    for (int i = 0; i < P; i++) {
        if (i < nsl) issue_w(i);
        fa_commit();
    }
    grid_dep_wait();
    for (int i = 0; i < P && i < nsl; i++) issue_x(i);

    float acc[NB * 4];
#pragma unroll
    for (int i = 0; i < NB * 4; i++) acc[i] = 0.f;
    u32 a0[4][4], a1[4][4];
    const int lr = warp * 16 + g;
    auto step = [&](int i, u32 (&a)[4][4], u32 (&prev)[4][4]) {
        // Step nsl (an even count's last pair) repeats slab nsl-1 with zero
        // weights: a branch around it would serialize the MMAs as above.
        const int si = min(i, nsl - 1);
        cp_async_wait<P - 1>();
        if (i < nsl) mbar_wait(bars + (i % ST) * 8, (u32)(i / ST) & 1u);
        __syncthreads(); // everyone's copies; every warpgroup past the MMAs of slab i-2
        if (i + P < nsl) {
            issue_w(i + P);
            issue_x(i + P);
        }
        fa_commit();
        const unsigned char* slot = smem + (si % ST) * R::SLOT;
        qmmw_frag<BN>(a, slot, lr, t, gshift);
        if (i == nsl) {
#pragma unroll
            for (int c = 0; c < 4; c++)
#pragma unroll
                for (int j = 0; j < 4; j++) a[c][j] = 0u;
        }
        const u32 xb = ring + (si % ST) * R::SLOT + R::XO;
        qmmw_keep(a); // every fragment defined before the fence
        wg_fence();
        // 128-byte swizzle, K-major: a row's 64 k are its 128 bytes, step c
        // starts 32 bytes in; 8-row groups 1024 bytes apart.
#pragma unroll
        for (int c = 0; c < 4; c++) wg_mma<BN>(acc, a[c], wg_desc(xb + 32 * c, 16, 1024) | (1ull << 62));
        wg_commit();
        wg_wait<1>(); // slab i-1's MMAs are done: prev is free
        qmmw_keep(prev);
    };
    // The first slab outside the loop: the accumulators' zeros must not
    // meet the MMAs in flight at the loop's head, or ptxas serializes every
    // MMA (its C7515 report).
    step(0, a0, a1);
    for (int i = 1; i < nsl; i += 2) {
        step(i, a1, a0);
        step(i + 1, a0, a1);
    }
    wg_wait<0>();
    wg_hold(acc);
    __syncthreads(); // the ring becomes the partial tile
    qmm_store_tile<NB, 1>(acc, reinterpret_cast<float*>(smem), y, bias, N, M, m0, nblk, warp, g, t, QMMW_THREADS);
}

// Two blocks an SM (registers: at most 128 a thread); 2 slabs in flight
// (a slot is 22.5 KB). A 64-row tile (32 accumulators, 6 slots) lost to
// qmm4 at 64 rows on 3 of 4 Llama shapes, and asking L2 for each weight
// row's whole 128-byte line (cp.async .L2::128B) changed nothing (s15b,
// s15c; notes/cuda-session-15.md).
#define QMMW(NAME, BN, ST, PER_SM)                                                                              \
    extern "C" __global__ void __launch_bounds__(QMMW_THREADS, PER_SM) NAME(QMMW_PARAMS) {                     \
        qmmw_impl<BN, ST>(QMM_ARGS, tmap);                                                                     \
    }
QMMW(qmm4_w128, 128, 4, 2)
