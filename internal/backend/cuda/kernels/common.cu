// Shared helpers. NVRTC runs without an include path on user machines, so
// nothing here includes a header: bf16/f16 conversions are bit operations
// or inline PTX, and the intrinsics used are NVRTC builtins.
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;
typedef unsigned long long u64;
#define DEV __device__ __forceinline__
#define NEG_INF __uint_as_float(0xff800000u)

// Programmatic dependent launch (Hopper): the backend launches kernels
// with the programmatic-serialization attribute, so a kernel's blocks may
// start while the previous kernel is still running. Every kernel must call
// grid_dep_wait() before it reads anything an earlier kernel wrote or
// writes anything an earlier kernel reads; only constant data (weights)
// may be touched before it. grid_dep_launch() lets the next kernel's
// blocks be scheduled as soon as all of this kernel's blocks are running.
// Both are no-ops when the kernel was launched without the attribute.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
DEV void grid_dep_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
DEV void grid_dep_launch() { asm volatile("griddepcontrol.launch_dependents;" :::); }
#else
DEV void grid_dep_wait() {}
DEV void grid_dep_launch() {}
#endif

// Thread block clusters (Hopper): the blocks of a cluster run at once on
// one GPC and read each other's shared memory. cluster_sync is a barrier
// over every thread of the cluster (arrive releases, wait acquires: writes
// before it are visible to every block after it); ld_cluster reads the
// float at p (an address in this block's shared memory) in block rank's
// copy. Only the _c decode attention kernels use them, launched with a
// cluster dimension on sm_90 and later.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
DEV void cluster_sync() {
    asm volatile("barrier.cluster.arrive.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
}
DEV u32 cluster_rank() {
    u32 r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
DEV float ld_cluster(const float* p, u32 rank) {
    u32 a, ra;
    float v;
    asm volatile("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(ra) : "r"(a), "r"(rank));
    asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(ra) : "memory");
    return v;
}
#else
DEV void cluster_sync() { __syncthreads(); }
DEV u32 cluster_rank() { return 0; }
DEV float ld_cluster(const float* p, u32) { return *p; }
#endif
// Shared-memory addresses and 16-byte cp.async (flash.cu, decode_tile.cu,
// qmm_wgmma.cu).
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
// prefetch_l2 asks for the line holding p to be brought into L2.
DEV void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }
// grid_dep_start is the usual prologue: let the next kernel launch, then
// wait for the previous one.
DEV void grid_dep_start() {
    grid_dep_launch();
    grid_dep_wait();
}

// bf16rn rounds to the nearest bf16, ties to even (NaN stays NaN).
DEV u16 bf16rn(float f) {
    u32 u = __float_as_uint(f);
    if ((u & 0x7f800000u) == 0x7f800000u) return (u16)((u >> 16) | ((u & 0xffffu) ? 0x40u : 0u)); // inf/nan
    u += 0x7fffu + ((u >> 16) & 1u);
    return (u16)(u >> 16);
}
DEV float bf16lo(u32 v) { return __uint_as_float(v << 16); }
DEV float bf16hi(u32 v) { return __uint_as_float(v & 0xffff0000u); }
DEV u16 f16bits(float f) {
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
DEV float f16f(u16 h) {
    float f;
    asm("{ .reg .f16 t; mov.b16 t, %1; cvt.f32.f16 %0, t; }" : "=f"(f) : "h"(h));
    return f;
}

DEV float4 f4(float a, float b, float c, float d) {
    float4 r;
    r.x = a, r.y = b, r.z = c, r.w = d;
    return r;
}
DEV float4 f4mul(float4 v, float s) { return f4(v.x * s, v.y * s, v.z * s, v.w * s); }
DEV float4 f4mul4(float4 v, float4 w) { return f4(v.x * w.x, v.y * w.y, v.z * w.z, v.w * w.w); }
DEV float f4dot(float4 v) { return v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w; }

DEV float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
DEV float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// block_sum/block_max reduce over the whole block (blockDim.x a multiple
// of 32, at most 1024); red needs 32 floats. Every thread gets the result.
DEV float block_sum(float v, float* red) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) red[w] = v;
    __syncthreads();
    v = lane < nw ? red[lane] : 0.f;
    return warp_sum(v);
}
DEV float block_max(float v, float* red) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) red[w] = v;
    __syncthreads();
    v = lane < nw ? red[lane] : NEG_INF;
    return warp_max(v);
}

// ldcg loads past L1: for values other blocks of the same launch wrote.
DEV float ldcg(const float* p) {
    float v;
    asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
}

// last_block takes a ticket on counter c after this block's partials are
// published; true in the last block to finish, which resets the counter
// for the next launch (graph replays).
DEV bool last_block(int* c, int S) {
    __shared__ int last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(c, 1) == S - 1;
    __syncthreads();
    if (!last) return false;
    __threadfence();
    if (threadIdx.x == 0) *c = 0;
    return true;
}

// Element loaders for dense weights: T is the storage type.
struct F32 { typedef float T; static DEV float at(const float* p, long long i) { return p[i]; } };
struct BF16 { typedef u16 T; static DEV float at(const u16* p, long long i) { return __uint_as_float(((u32)p[i]) << 16); } };
struct F16 { typedef u16 T; static DEV float at(const u16* p, long long i) { return f16f(p[i]); } };

// Scale/bias pairs of one quantization group, interleaved at upload time
// so one load fetches both: SBbf packs bf16 scale (low half) and bias
// (high half) in a u32; SBf32 is a float2 (used for f16 and f32 sources,
// which convert exactly).
// fp is false for both: w = s*q + b with q the integer code; SBfp below
// is the floating-point modes' form. sel picks element e's scale out of
// a loaded raw value: the raw value itself, but for SBfp2 (two groups a
// word).
struct SBbf {
    typedef u32 raw;
    static constexpr bool fp = false, pair = false;
    static DEV raw sel(raw v, long long) { return v; }
    static DEV raw load(const u32* p, long long g) { return p[g]; }
    static DEV void get(raw v, float& s, float& b) { s = bf16lo(v); b = bf16hi(v); }
};
struct SBf32 {
    typedef float2 raw;
    static constexpr bool fp = false, pair = false;
    static DEV raw sel(raw v, long long) { return v; }
    static DEV raw load(const u32* p, long long g) { return reinterpret_cast<const float2*>(p)[g]; }
    static DEV void get(raw v, float& s, float& b) { s = v.x; b = v.y; }
};

// SBfp: MLX's floating-point modes (mxfp4, nvfp4, mxfp8): w = s*e with e
// the E2M1 or E4M3 value of the code and no bias. The upload decodes each
// group's scale byte (E8M0 or E4M3) into the low half of a u32 as bf16,
// pre-multiplied by 2^14 (4 bits) or 2^8 (8 bits), which undoes the
// scaling of fp_elem's and unpack_fp's f16 values; the high half is 0.
// One u32 a group keeps the affine kernels' scale indexing as it is.
struct SBfp {
    typedef u32 raw;
    static constexpr bool fp = true, pair = false;
    static DEV raw sel(raw v, long long) { return v; }
    static DEV raw load(const u32* p, long long g) { return p[g]; }
    static DEV void get(raw v, float& s, float& b) { s = bf16lo(v); b = 0.f; }
};
// SBfp2: nvfp4 (groups of 16) with rows of whole 32-element pairs of
// groups: one u32 holds both scales of a pair (low half the first), and
// the kernels index it as a group of 32 (gshift 5), so a 16-byte chunk
// of 4-bit codes again has one scale word: chunk_fma applies the low
// scale to its first two words and the high one to the last two; sel
// moves element e's scale into the low half for get.
struct SBfp2 {
    typedef u32 raw;
    static constexpr bool fp = true, pair = true;
    static DEV raw sel(raw v, long long e) { return (e & 16) ? v >> 16 : v; }
    static DEV raw load(const u32* p, long long g) { return p[g]; }
    static DEV void get(raw v, float& s, float& b) { s = bf16lo(v); b = 0.f; }
};

// fp_h16 turns a code into the f16 bits of its value times 2^-14 (E2M1,
// 4 bits) or 2^-8 (E4M3, 8 bits): the code's exponent and mantissa bits
// dropped into the f16's low exponent and high mantissa bits, so E2M1's
// subnormal (code 1, 0.5) and E4M3's land on f16 subnormals, which the
// f16 -> f32 conversion takes exactly.
DEV u32 fp_h16(u32 c, int bits) {
    return bits == 4 ? ((c & 7u) << 9) | ((c & 8u) << 12) : ((c & 0x7fu) << 7) | ((c & 0x80u) << 8);
}
// qf is a code's value as the dequantization multiplies it by the scale:
// the integer for the affine forms, the (scaled) float for SBfp.
template <class SB>
DEV float qf(u32 q, int bits) {
    if constexpr (SB::fp) return f16f((u16)fp_h16(q, bits));
    else return (float)q;
}

// qval extracts element e of a row packed at `bits` per element as one
// LSB-first bit stream of little-endian u32 words (MLX's layout); an
// element may straddle two words for 3, 5 and 6 bits.
DEV u32 qval(const u32* row, long long e, int bits) {
    long long bit = e * bits;
    long long wi = bit >> 5;
    int sh = (int)(bit & 31);
    u32 v = row[wi] >> sh;
    if (sh + bits > 32) v |= row[wi + 1] << (32 - sh);
    return v & ((1u << bits) - 1u);
}

// gate_act is a gated MLP's activation of its gate (the Go side's
// actCode): 1 SiLU, 2 GELU in its tanh form (gelu_pytorch_tanh), 3 the
// exact erf GELU (hidden_act "gelu").
DEV float gate_act(int act, float x) {
    if (act == 2) return 0.5f * x * (1.f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    if (act == 3) return 0.5f * x * (1.f + erff(x * 0.7071067811865476f));
    return x / (1.f + expf(-x));
}

// swiglu_clamped is gpt-oss's gated activation (backend.SwiGLUClamped):
// the gate clamped to <= limit, up to [-limit, limit], then
// gate*sigmoid(alpha*gate) * (up+1), as the CPU backend computes it.
DEV float swiglu_clamped(float g, float u, float alpha, float limit) {
    const float x = fminf(g, limit), up = fminf(fmaxf(u, -limit), limit);
    return x / (1.f + expf(-alpha * x)) * (up + 1.f);
}

// dense_at reads element i of a dense weight of dtype dt (0 f32, 1 bf16,
// 2 f16: denseCode on the Go side) as a float.
DEV float dense_at(const void* p, long long i, int dt) {
    if (dt == 1) return BF16::at(static_cast<const u16*>(p), i);
    if (dt == 2) return F16::at(static_cast<const u16*>(p), i);
    return static_cast<const float*>(p)[i];
}
