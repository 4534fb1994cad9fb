// Paged attention. The cache of one layer is laid out
// [block][kvHead][slot][headDim] (f32), so the rows of one head inside a
// block are contiguous. A step's token positions, token->sequence map and
// block tables come from the step buffers.

// kv_store writes this step's k and v rows into their slots. One block per
// token.
extern "C" __global__ void kv_store(float* Kc, float* Vc, const float* k, const float* v, const int* pos,
                                    const int* tok2seq, const int* btab, int btStride, int bs, int kvh, int hd) {
    int t = blockIdx.x, p = pos[t];
    long long blk = btab[(long long)tok2seq[t] * btStride + p / bs];
    int w = kvh * hd;
    for (int i = threadIdx.x; i < w; i += blockDim.x) {
        int h = i / hd, d = i - h * hd;
        long long dst = ((blk * kvh + h) * bs + p % bs) * hd + d;
        Kc[dst] = k[(long long)t * w + i];
        Vc[dst] = v[(long long)t * w + i];
    }
}

#define ATT_THREADS 128
#define ATT_MAXD 512 // largest head dim: 4 output dims per thread

// attention: grid (heads, tokens, splits), ATT_THREADS threads. Each block
// covers one split of one (token, head)'s causal range [first, pos]: the
// score phase gives one key per thread (the dot product over the head dim
// in registers), an online softmax runs over chunks of ATT_THREADS keys, and
// the PV phase gives each thread up to 4 output dims with the chunk's
// probabilities in shared memory. The split count is fixed by the launch
// (not by the context length), so decode steps keep one graph as the
// context grows: each split takes ceil(n/splits) of the n keys.
//
// With splits > 1 the block writes (max, sum, unnormalised o) to part;
// attn_combine merges them.
//
// Decode steps (every sequence one token) pass kin/vin: the step's own key
// and value (position p) are read from those rows instead of the cache, and
// the first block of each kv head's group (h % G == 0, split 0) writes them
// into the cache, so no separate kv_store launch runs and no block of this
// launch reads a slot that is being written. With cnt set (a zeroed counter
// per (token, head)), the last split block to finish merges the splits
// itself and resets its counter, so no attn_combine launch runs either: two
// launches fewer per layer and decode step.
DEV float ldcg(const float* p) {
    float v;
    asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
}

extern "C" __global__ void __launch_bounds__(ATT_THREADS)
attention(float* out, float* part, const float* q, float* Kc, float* Vc, const int* pos,
          const int* tok2seq, const int* btab, int btStride, int bs, int heads, int kvh, int hd, float scale,
          int window, float softcap, const float* kin, const float* vin, int ldk, int* cnt) {
    __shared__ float qs[ATT_MAXD];
    __shared__ float ps[ATT_THREADS];
    __shared__ const float* vrow[ATT_THREADS];
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
    const float *kself = nullptr, *vself = nullptr;
    if (kin) {
        kself = kin + (long long)t * ldk + kh * hd;
        vself = vin + (long long)t * ldk + kh * hd;
        if (split == 0 && h % (heads / kvh) == 0) {
            long long blk = bt[p / bs];
            long long dst = ((blk * kvh + kh) * bs + p % bs) * hd;
            for (int d = tid; d < hd; d += ATT_THREADS) Kc[dst + d] = kself[d], Vc[dst + d] = vself[d];
        }
    }
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
            const bool self = kself && j == p;
            vrow[tid] = self ? vself : Vc + off;
            const float* kp = self ? kself : Kc + off;
            float dot = 0.f;
            if (vec) {
                // Unrolled so several 16-byte loads of the key row are in
                // flight (v1 waited on each: ~24 us per decode call).
#pragma unroll 8
                for (int d = 0; d < hd; d += 4) {
                    float4 kv = *reinterpret_cast<const float4*>(kp + d);
                    dot = fmaf(qs[d], kv.x, dot);
                    dot = fmaf(qs[d + 1], kv.y, dot);
                    dot = fmaf(qs[d + 2], kv.z, dot);
                    dot = fmaf(qs[d + 3], kv.w, dot);
                }
            } else {
                for (int d = 0; d < hd; d++) dot = fmaf(qs[d], kp[d], dot);
            }
            s = dot * scale;
            if (softcap > 0.f) s = softcap * tanhf(s / softcap);
        }
        float mnew = fmaxf(m, block_max(s, red));
        float corr = m == NEG_INF ? 0.f : expf(m - mnew); // nothing to rescale on the first chunk
        float pj = j < j1 ? expf(s - mnew) : 0.f;
        ps[tid] = pj;
        l = l * corr + block_sum(pj, red); // block_sum's barriers also publish ps and vrow
        int nk = min(ATT_THREADS, j1 - c);
        if (vec) {
            // PV with float4 columns: G groups of dq threads, group g
            // taking keys g, g+G, ... of the chunk (4 dims a thread).
            if (g < G) {
                float4 acc = f4(o4.x * corr, o4.y * corr, o4.z * corr, o4.w * corr);
#pragma unroll 4
                for (int i = g; i < nk; i += G) {
                    float4 vv = *reinterpret_cast<const float4*>(vrow[i] + 4 * li);
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
                    for (int i = 0; i < nk; i++) acc = fmaf(ps[i], vrow[i][d], acc);
                    o[k] = acc;
                }
            }
        }
        m = mnew;
        __syncthreads(); // ps and vrow are rewritten by the next chunk
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
    if (S == 1) {
        float inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            int d = tid + k * ATT_THREADS;
            if (d < hd) out[((long long)t * heads + h) * hd + d] = o[k] * inv;
        }
        return;
    }
    float* pp = part + (((long long)t * heads + h) * S + split) * (hd + 2);
    if (tid == 0) { pp[0] = m; pp[1] = l; }
#pragma unroll
    for (int k = 0; k < 4; k++) {
        int d = tid + k * ATT_THREADS;
        if (d < hd) pp[2 + d] = o[k];
    }
    if (!cnt) return;
    // Last block of this (token, head) merges: the partials are published
    // (fence) before the ticket, and read back past L1 (ld.cg).
    __shared__ int last;
    __threadfence();
    __syncthreads();
    if (tid == 0) last = atomicAdd(cnt + (long long)t * heads + h, 1) == S - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    if (tid == 0) cnt[(long long)t * heads + h] = 0; // ready for the next launch (graph replays)
    const float* pb = part + ((long long)t * heads + h) * S * (hd + 2);
    float M = NEG_INF;
    for (int s = 0; s < S; s++) M = fmaxf(M, ldcg(pb + s * (hd + 2)));
    float L = 0.f;
    for (int s = 0; s < S; s++) {
        float ms = ldcg(pb + s * (hd + 2));
        if (ms > NEG_INF) L += ldcg(pb + s * (hd + 2) + 1) * expf(ms - M);
    }
    float inv = L > 0.f ? 1.f / L : 0.f;
    for (int d = tid; d < hd; d += ATT_THREADS) {
        float acc = 0.f;
        for (int s = 0; s < S; s++) {
            float ms = ldcg(pb + s * (hd + 2));
            if (ms > NEG_INF) acc += ldcg(pb + s * (hd + 2) + 2 + d) * expf(ms - M);
        }
        out[((long long)t * heads + h) * hd + d] = acc * inv;
    }
}

// attn_combine merges the splits of one (token, head): grid (heads, tokens).
extern "C" __global__ void attn_combine(float* out, const float* part, int heads, int hd, int S) {
    const int h = blockIdx.x, t = blockIdx.y;
    const float* pp = part + ((long long)t * heads + h) * S * (hd + 2);
    float M = NEG_INF;
    for (int s = 0; s < S; s++) M = fmaxf(M, pp[s * (hd + 2)]);
    float L = 0.f;
    for (int s = 0; s < S; s++) {
        float ms = pp[s * (hd + 2)];
        if (ms > NEG_INF) L += pp[s * (hd + 2) + 1] * expf(ms - M);
    }
    float inv = L > 0.f ? 1.f / L : 0.f;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float acc = 0.f;
        for (int s = 0; s < S; s++) {
            float ms = pp[s * (hd + 2)];
            if (ms > NEG_INF) acc += pp[s * (hd + 2) + 2 + d] * expf(ms - M);
        }
        out[((long long)t * heads + h) * hd + d] = acc * inv;
    }
}
