// Sampling a step's logit rows on the device (sample.go,
// backend.RowSampler): one block of SAMPLE_THREADS per row, only the
// chosen id and the logprobs asked for go back to the host.
//
// The rule is internal/sample's, in its order: penalties (repetition over
// the prompt and output, then frequency and presence over the output),
// then greedy when the temperature is below 1e-5, else top-k, top-p over
// the top-k survivors, min-p relative to the top token, and one draw by
// inverse CDF over the survivors in token-id order with
// u = Philox4x32-10(key = seed, counter = output position)
// (sample.Sampler.SampleWith, sample.Uniform). Ranks are (logit desc, id
// asc) everywhere, as the CPU's. Nothing is sorted: every cut is a key
// found by a 4-pass radix descent over the row (8 bits a pass, per-warp
// fixed-point histograms in shared memory), counting for top-k and weighing for top-p,
// and the ties at a cut are taken in id order by a block scan over
// thread-contiguous chunks.
//
// Penalties are written into the row in place and undone before the
// kernel ends (the raw values wait in the history entries), so the logits
// tensor is unchanged afterwards.

#define SAMPLE_THREADS 512
#define SAMPLE_WARPS (SAMPLE_THREADS / 32)
#define SAMPLE_MAX_TOP 20 // sample.MaxLogprobs
#define SAMPLE_PARAMS 16  // words per row (sample.go, sampleParamWords)

// philox4x32_10 is Random123's Philox4x32-10; sample.Philox4x32 is its Go
// twin (checked against the published known answers).
DEV uint4 philox4x32_10(uint4 c, uint2 k) {
#pragma unroll
    for (int r = 0; r < 10; r++) {
        if (r > 0) { k.x += 0x9E3779B9u; k.y += 0xBB67AE85u; }
        const unsigned hi0 = __umulhi(0xD2511F53u, c.x), lo0 = 0xD2511F53u * c.x;
        const unsigned hi1 = __umulhi(0xCD9E8D57u, c.z), lo1 = 0xCD9E8D57u * c.z;
        c = make_uint4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
    }
    return c;
}

// philox_uniform is sample.Uniform: 53 bits of the first two words.
DEV double philox_uniform(unsigned slo, unsigned shi, unsigned clo, unsigned chi) {
    const uint4 o = philox4x32_10(make_uint4(clo, chi, 0u, 0u), make_uint2(slo, shi));
    const unsigned long long b = (((unsigned long long)o.x << 32) | o.y) >> 11;
    return ldexp((double)b, -53);
}

// sample_key maps a logit to an unsigned key in rank order: NaN reads as
// -inf (it never wins, as in the CPU's scans) and -0 as +0 (they are equal
// logits, ranked by id).
DEV unsigned sample_key(float v) {
    if (v != v) v = NEG_INF;
    unsigned u = __float_as_uint(v);
    if (u == 0x80000000u) u = 0u;
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// sample_value is the logit of a key.
DEV float sample_value(unsigned k) {
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// sample_weight is the CPU's e = exp((v - m) / T) for v <= m, computed in
// double like its expNeg and rounded to float; 0 below the float range.
DEV float sample_weight(float v, float m, double invT) {
    const double x = ((double)v - (double)m) * invT;
    return x >= -87.3 ? (float)exp(x) : 0.f;
}

// sample_shared is the block's scratch.
struct sample_shared {
    unsigned long long wh[SAMPLE_WARPS * 256]; // per-warp radix histograms, fixed point
    double dh[256];                            // their sums
    double red[SAMPLE_WARPS];                  // reductions and scans
    float fred[SAMPLE_WARPS];
    int ired[SAMPLE_WARPS];
    unsigned key;
    double above;
    int fell, pick, last, ntop;
    float topv[SAMPLE_MAX_TOP];
    int topi[SAMPLE_MAX_TOP];
};

// SAMPLE_FIX is the fixed-point scale of the weights in the histograms:
// integer sums are exact and do not depend on the order of the adds, and
// a float atomicAdd on shared memory is a compare-and-swap loop, which 32
// lanes hitting one bin (most logits share their top key byte) serialise.
#define SAMPLE_FIX 2147483648.f // 2^31: a weight <= 1 fits 32 bits

// sample_hist_add adds this lane's fixed-point weight wfix to bin of its
// warp's histogram h (bin 256: nothing). Every lane of the warp calls it:
// the lanes of one bin sum their weights (__reduce_add_sync over the
// group __match_any_sync finds, in 16-bit halves so 32 lanes cannot
// overflow) and the group's first lane adds the sum; groups of one warp
// have distinct bins, so no atomics.
DEV void sample_hist_add(unsigned long long* h, unsigned bin, unsigned wfix) {
    const unsigned peers = __match_any_sync(0xffffffffu, bin);
    const unsigned hi = __reduce_add_sync(peers, wfix >> 16), lo = __reduce_add_sync(peers, wfix & 0xffffu);
    if (bin < 256u && (int)(threadIdx.x & 31) == __ffs(peers) - 1) h[bin] += ((unsigned long long)hi << 16) + lo;
    __syncwarp();
}

// sample_sum is the block's sum of v, in every thread.
DEV double sample_sum(double v, sample_shared& s) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) s.red[threadIdx.x >> 5] = v;
    __syncthreads();
    double t = 0;
    for (int w = 0; w < SAMPLE_WARPS; w++) t += s.red[w];
    return t;
}

// sample_excl is the block's exclusive prefix sum of v in thread order;
// total gets the sum.
DEV double sample_excl(double v, sample_shared& s, double& total) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    double inc = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const double n = __shfl_up_sync(0xffffffffu, inc, o);
        if (lane >= o) inc += n;
    }
    double ex = __shfl_up_sync(0xffffffffu, inc, 1);
    if (lane == 0) ex = 0;
    __syncthreads();
    if (lane == 31) s.red[w] = inc;
    __syncthreads();
    double before = 0;
    total = 0;
    for (int i = 0; i < SAMPLE_WARPS; i++) {
        if (i < w) before += s.red[i];
        total += s.red[i];
    }
    return before + ex;
}

// sample_argmax is the first index of the largest value of x[0, cols)
// (NaN skipped; index 0 when nothing is above -inf), and that value, in
// every thread: sample.Greedy.
DEV int sample_argmax(const float* x, int cols, float& best, sample_shared& s) {
    best = NEG_INF;
    int idx = 0x7fffffff;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) argmax_pick(best, idx, x[c], c);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        argmax_pick(best, idx, __shfl_xor_sync(0xffffffffu, best, o), __shfl_xor_sync(0xffffffffu, idx, o));
    __syncthreads();
    if ((threadIdx.x & 31) == 0) { s.fred[threadIdx.x >> 5] = best; s.ired[threadIdx.x >> 5] = idx; }
    __syncthreads();
    best = NEG_INF, idx = 0x7fffffff;
    for (int w = 0; w < SAMPLE_WARPS; w++) argmax_pick(best, idx, s.fred[w], s.ired[w]);
    if (idx == 0x7fffffff) { idx = 0; best = NEG_INF; } // all NaN
    return idx;
}

// sample_radix walks the rank order from the top, weighing each element of
// the row by 1 (mass false: counting) or by its e (mass true), and finds
// the key of the element where the running weight first reaches target;
// above gets the weight of everything ranked strictly above that key.
// With strict, only keys above lo take part, plus tieMass for the ties at
// lo (top-p over the top-k survivors, whose last key is partly kept). fell
// reports that the whole weight stayed below target (float rounding): the
// key is then the lowest one present.
DEV unsigned sample_radix(const float* x, int cols, bool mass, float m, double invT, bool strict, unsigned lo,
                          double tieMass, double target, double& above, bool& fell, sample_shared& s) {
    unsigned prefix = 0;
    above = 0;
    int fellAt = 0; // thread 0's: some level fell short
    unsigned long long* mine = s.wh + (threadIdx.x >> 5) * 256;
    const double unit = mass ? 1.0 / SAMPLE_FIX : 1.0;
    for (int shift = 24; shift >= 0; shift -= 8) {
        const unsigned hi = shift == 24 ? 0u : (0xffffffffu << (shift + 8));
        __syncthreads();
        for (int i = threadIdx.x; i < SAMPLE_WARPS * 256; i += blockDim.x) s.wh[i] = 0ull;
        __syncthreads();
        // Whole-block strides, so that every lane of a warp runs each
        // sample_hist_add (its warp intrinsics need them all).
        for (int c0 = 0; c0 < cols; c0 += blockDim.x) {
            const int c = c0 + threadIdx.x;
            unsigned bin = 256u, wfix = 0u;
            if (c < cols) {
                const float v = x[c];
                const unsigned k = sample_key(v);
                if ((k & hi) == prefix && !(strict && k <= lo)) {
                    wfix = mass ? __float2uint_rn(sample_weight(v, m, invT) * SAMPLE_FIX) : 1u;
                    if (wfix) bin = (k >> shift) & 255u;
                }
            }
            sample_hist_add(mine, bin, wfix);
        }
        __syncthreads();
        if (threadIdx.x < 256) {
            unsigned long long t = 0;
            for (int w = 0; w < SAMPLE_WARPS; w++) t += s.wh[w * 256 + threadIdx.x];
            double d = (double)t * unit;
            if (strict && (lo & hi) == prefix && ((lo >> shift) & 255u) == threadIdx.x) d += tieMass;
            s.dh[threadIdx.x] = d;
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            double acc = above;
            int pick = -1, lowest = -1;
            for (int b = 255; b >= 0; b--) {
                const double h = s.dh[b];
                if (!(h > 0)) continue;
                lowest = b;
                if (acc + h >= target) { pick = b; break; }
                acc += h;
            }
            if (pick < 0) { // short of target: keep everything down to the lowest key
                pick = max(lowest, 0);
                acc -= lowest >= 0 ? s.dh[lowest] : 0;
                fellAt = 1;
            }
            s.key = prefix | ((unsigned)pick << shift);
            s.above = acc;
            s.fell = fellAt;
        }
        __syncthreads();
        prefix = s.key;
        above = s.above;
    }
    fell = s.fell != 0;
    return prefix;
}

// sample_chunk is this thread's contiguous span of ids [c0, c1): the scans
// that need id order walk these.
DEV void sample_chunk(int cols, int& c0, int& c1) {
    const int C = (cols + blockDim.x - 1) / blockDim.x;
    c0 = min(cols, (int)threadIdx.x * C);
    c1 = min(cols, c0 + C);
}

// sample_top fills the shared top list with the n top-ranked entries of
// the raw row, best first (sample.Result.Top's order).
DEV void sample_top(const float* x, int cols, int n, sample_shared& s) {
    double above;
    bool fell;
    const unsigned kk = sample_radix(x, cols, false, 0.f, 1.0, false, 0u, 0.0, (double)n, above, fell, s);
    const int r = n - (int)above; // ties at kk taken, lowest ids first
    int c0, c1;
    sample_chunk(cols, c0, c1);
    int ties = 0;
    for (int c = c0; c < c1; c++) ties += sample_key(x[c]) == kk;
    double total;
    int t = (int)sample_excl((double)ties, s, total);
    if (threadIdx.x == 0) s.ntop = 0;
    __syncthreads();
    for (int c = c0; c < c1; c++) {
        const unsigned k = sample_key(x[c]);
        bool take = k > kk;
        if (k == kk) take = t++ < r;
        if (take) {
            const int j = atomicAdd(&s.ntop, 1);
            if (j < SAMPLE_MAX_TOP) { s.topv[j] = x[c]; s.topi[j] = c; }
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) { // insertion sort of <= 20 entries by rank
        const int m = min(s.ntop, n);
        for (int i = 1; i < m; i++) {
            const float v = s.topv[i];
            const int id = s.topi[i];
            const unsigned kv = sample_key(v);
            int j = i - 1;
            while (j >= 0 && (sample_key(s.topv[j]) < kv || (sample_key(s.topv[j]) == kv && s.topi[j] > id))) {
                s.topv[j + 1] = s.topv[j];
                s.topi[j + 1] = s.topi[j];
                j--;
            }
            s.topv[j + 1] = v;
            s.topi[j + 1] = id;
        }
        s.ntop = m;
    }
    __syncthreads();
}

// sample_logprob is sample's logprob: v - lse, with a degenerate (all
// masked) row giving 0 to its max tokens and -inf to the others.
DEV float sample_logprob(float v, double lse) {
    if (v != v) return NEG_INF;
    if (isinf(lse)) return (double)v == lse ? 0.f : NEG_INF;
    return (float)((double)v - lse);
}

// sample_filter is the survivors' rule for the final walks, with the cuts
// found by the radix descents.
struct sample_filter {
    float m, minP;
    double invT;
    bool hasK, hasP;
    unsigned tk, tp;
    long long rk, rp; // ties kept at tk (top-k) and at tp (top-p)
    long long nk, np; // ties seen so far in id order, this thread
};

// sample_weigh is element c's weight if it survives, else 0. It must be
// called in id order within a thread (the tie counters advance).
DEV float sample_weigh(sample_filter& f, float v) {
    const unsigned k = sample_key(v);
    if (f.hasK) {
        if (k < f.tk) return 0.f;
        if (k == f.tk && f.nk++ >= f.rk) return 0.f;
    }
    if (f.hasP) {
        if (k < f.tp) return 0.f;
        if (k == f.tp && f.np++ >= f.rp) return 0.f;
    }
    const float w = sample_weight(v, f.m, f.invT);
    return w >= f.minP ? w : 0.f;
}

// sample_draw is the token the filters and the uniform u pick from the
// penalised row (finite max m).
DEV int sample_draw(const float* x, int cols, const int* P, float m, double u, sample_shared& s) {
    sample_filter f;
    f.m = m;
    f.invT = 1.0 / (double)__int_as_float(P[0]);
    f.minP = __int_as_float(P[3]);
    f.hasK = P[1] > 0;
    f.hasP = __int_as_float(P[2]) < 1.f;
    f.tk = f.tp = 0u;
    f.rk = f.rp = 0x7fffffffffffffffLL;
    f.nk = f.np = 0;
    double above, tieMass = 0;
    bool fell;
    if (f.hasK) {
        f.tk = sample_radix(x, cols, false, m, f.invT, false, 0u, 0.0, (double)P[1], above, fell, s);
        f.rk = P[1] - (long long)above;
        tieMass = (double)f.rk * sample_weight(sample_value(f.tk), m, f.invT);
    }
    if (f.hasP) {
        double z = 0;
        for (int c = threadIdx.x; c < cols; c += blockDim.x) {
            const float v = x[c];
            if (!f.hasK || sample_key(v) > f.tk) z += sample_weight(v, m, f.invT);
        }
        z = sample_sum(z, s) + tieMass;
        const double target = (double)__int_as_float(P[2]) * z;
        f.tp = sample_radix(x, cols, true, m, f.invT, f.hasK, f.tk, tieMass, target, above, fell, s);
        const double wp = sample_weight(sample_value(f.tp), m, f.invT);
        // Tie q at tp (id order) is kept iff above + q*wp < target.
        if (!fell && wp > 0) f.rp = (long long)ceil((target - above) / wp);
    }
    int c0, c1;
    sample_chunk(cols, c0, c1);
    double total;
    if (f.hasK) { // this thread's first tie rank at tk
        long long t = 0;
        for (int c = c0; c < c1; c++) t += sample_key(x[c]) == f.tk;
        f.nk = (long long)sample_excl((double)t, s, total);
    }
    if (f.hasP) { // and at tp among the top-k survivors
        long long t = 0, nk = f.nk;
        for (int c = c0; c < c1; c++) {
            const unsigned k = sample_key(x[c]);
            bool in = !f.hasK || k > f.tk || (k == f.tk && nk++ < f.rk);
            t += in && k == f.tp;
        }
        f.np = (long long)sample_excl((double)t, s, total);
    }
    const long long nk0 = f.nk, np0 = f.np;
    double own = 0;
    for (int c = c0; c < c1; c++) own += sample_weigh(f, x[c]);
    const double ex = sample_excl(own, s, total);
    const double target = u * total;
    if (threadIdx.x == 0) { s.pick = 0x7fffffff; s.last = -1; }
    __syncthreads();
    if (own > 0) {
        if (ex + own > target) atomicMin(&s.pick, (int)threadIdx.x);
        atomicMax(&s.last, (int)threadIdx.x);
    }
    __syncthreads();
    const int who = s.pick != 0x7fffffff ? s.pick : s.last;
    __syncthreads();
    if (who < 0) return -1; // no positive weight: cannot happen with a finite max
    if ((int)threadIdx.x == who) {
        f.nk = nk0, f.np = np0;
        double acc = ex;
        int id = -1, last = c0;
        for (int c = c0; c < c1; c++) {
            const float w = sample_weigh(f, x[c]);
            if (w > 0) {
                acc += w;
                last = c;
                if (acc > target) { id = c; break; }
            }
        }
        s.pick = id >= 0 ? id : last; // u rounded up to the mass: the last survivor
    }
    __syncthreads();
    return s.pick;
}

// sample_rows: one block per row. P = prm + SAMPLE_PARAMS*row: temperature,
// top_k (0 off), top_p (1 off), min_p (0 off), repetition (1 off), presence,
// frequency, seed lo/hi, counter lo/hi, logprobs, history offset and
// length (entries of hist, 3 words each: id, output count, raw value
// slot), flags (1 greedy, 2 penalised, 4 masked), the mask's offset in prm
// (32-bit words, bit c of word c/32 allows token c). A masked row's other
// logits are set to -Inf after the finite check, before the statistics (the
// constrained distribution's logprobs, as on the host). out row stride os words: id,
// logprob, then (id, logprob) per top entry; feed[row] gets the id too.
extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS) sample_rows(int* out, int* feed, float* logits,
                                                                         const int* prm, int* hist, int cols, int os) {
    grid_dep_start();
    __shared__ sample_shared s;
    const int row = blockIdx.x;
    const int* P = prm + SAMPLE_PARAMS * row;
    float* x = logits + (long long)row * cols;
    int* o = out + (long long)row * os;
    const int flags = P[14], ntop = P[11];
    // Raw statistics: a NaN or +Inf row fails its request.
    bool bad = false;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) bad |= !(x[c] <= 3.402823466e38f);
    if (sample_sum(bad ? 1.0 : 0.0, s) > 0) {
        if (threadIdx.x == 0) { o[0] = (int)0x80000000; o[1] = 0; feed[row] = (int)0x80000000; }
        return;
    }
    if (flags & 4) {
        const unsigned* M = (const unsigned*)prm + P[15];
        for (int c = threadIdx.x; c < cols; c += blockDim.x)
            if (!((M[c >> 5] >> (c & 31)) & 1u)) x[c] = NEG_INF;
        __syncthreads();
    }
    float rawMax;
    sample_argmax(x, cols, rawMax, s);
    double lse = rawMax;
    if (!isinf(rawMax)) {
        double z = 0;
        for (int c = threadIdx.x; c < cols; c += blockDim.x) z += exp((double)x[c] - (double)rawMax);
        lse += log(sample_sum(z, s));
    }
    if (ntop > 0) sample_top(x, cols, ntop, s);
    // Penalties in place: save the raw values, then write the penalised.
    int* H = hist + 3LL * P[12];
    const int nh = (flags & 2) ? P[13] : 0;
    for (int i = threadIdx.x; i < nh; i += blockDim.x)
        if ((unsigned)H[3 * i] < (unsigned)cols) H[3 * i + 2] = __float_as_int(x[H[3 * i]]);
    __syncthreads();
    const float rep = __int_as_float(P[4]), pres = __int_as_float(P[5]), freq = __int_as_float(P[6]);
    for (int i = threadIdx.x; i < nh; i += blockDim.x) {
        const int id = H[3 * i], cnt = H[3 * i + 1];
        if ((unsigned)id >= (unsigned)cols) continue;
        float v = __int_as_float(H[3 * i + 2]);
        if (rep != 1.f) v = v > 0.f ? __fdiv_rn(v, rep) : __fmul_rn(v, rep);
        if (cnt > 0) {
            v = __fsub_rn(v, __fmul_rn(freq, (float)cnt));
            v = __fsub_rn(v, pres);
        }
        x[id] = v;
    }
    __syncthreads();
    float m;
    int id = sample_argmax(x, cols, m, s);
    if (!(flags & 1) && !isinf(m)) {
        const double u = philox_uniform((unsigned)P[7], (unsigned)P[8], (unsigned)P[9], (unsigned)P[10]);
        const int d = sample_draw(x, cols, P, m, u, s);
        if (d >= 0) id = d;
    }
    for (int i = threadIdx.x; i < nh; i += blockDim.x)
        if ((unsigned)H[3 * i] < (unsigned)cols) x[H[3 * i]] = __int_as_float(H[3 * i + 2]);
    __syncthreads();
    if (threadIdx.x == 0) {
        o[0] = id;
        o[1] = __float_as_int(sample_logprob(x[id], lse));
        feed[row] = id;
    }
    if (ntop > 0 && (int)threadIdx.x < s.ntop && 2 + 2 * (int)threadIdx.x + 1 < os) {
        o[2 + 2 * threadIdx.x] = s.topi[threadIdx.x];
        o[3 + 2 * threadIdx.x] = __float_as_int(sample_logprob(s.topv[threadIdx.x], lse));
    }
}
