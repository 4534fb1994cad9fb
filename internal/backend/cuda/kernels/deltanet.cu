// Gated DeltaNet linear attention (Qwen3.5), backend.DeltaNetBackend,
// following the CPU backend's deltanet.go (transformers'
// modeling_qwen3_5.py). Two launches a layer and step, every sequence of
// the step in each (ragged, prefill and decode mixed):
//
//   deltanet_conv: the causal depthwise conv + silu of the q|k|v channels,
//     a block per (128 channels, query tile of one sequence), each thread
//     one channel sliding a register window down the tile's rows;
//   deltanet_scan_KP: the delta rule for key dims up to KP, a block per
//     (32 or 16 value columns, value head, sequence), then the conv window
//     update.
//
// The state of one slot is [ConvKernel-1][Channels] conv inputs (oldest
// first) then VHeads matrices [KDim][VDim], f32, as the CPU keeps it. A
// sequence whose first position in the step is 0 reads a zero state.
// sinfo holds per sequence (first row, rows, slot).
//
// Here the delta rule runs as the one-token recurrence over a sequence's
// positions, for sequences of fewer than cmin positions in the step
// (decode, short chunks); longer ones take the chunked matrix form in
// deltanet_chunk.cu, which reads and writes the same state (the same
// function up to rounding: the CPU backend's tests). The columns are
// independent (S[:, j] evolves from k, q, beta, decay and v[j] alone), so
// each block keeps its 32 columns of a head's state in registers for the
// whole sequence, read once and written once, and the positions go
// through one at a time with no barrier between them.

#define DN_KMAX 8 // largest conv kernel
#define DN_THREADS 128 // a scan block: 128/RP value columns, RP threads a column
#define DN_LC 16       // positions staged in shared memory at a time

// dn_w reads element i of a dense weight stored as f32 (0), bf16 (1) or
// f16 (2).
DEV float dn_w(const void* w, int dt, int i) {
    if (dt == 1) return BF16::at((const u16*)w, i);
    if (dt == 2) return F16::at((const u16*)w, i);
    return ((const float*)w)[i];
}

// deltanet_conv writes xs = silu(causal depthwise conv of in) for the rows
// of query tile blockIdx.y (tiles: (first row, rows), each inside one
// sequence). Taps are kept right-aligned in DN_KMAX registers so every
// index is a constant: wr[m] is tap m-(DN_KMAX-K) (zero before tap 0),
// x[m] the input DN_KMAX-1-m rows before the current one.
extern "C" __global__ void __launch_bounds__(DN_THREADS) deltanet_conv(float* xs, const float* in, const void* w, int wdt,
        const float* state, int sf, const int* tiles, const int* pos, const int* tok2seq, const int* sinfo, int C, int K) {
    grid_dep_start();
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    const int r0 = tiles[2 * blockIdx.y], n = tiles[2 * blockIdx.y + 1];
    const int s = tok2seq[r0];
    const int start = sinfo[3 * s], slot = sinfo[3 * s + 2];
    const bool fresh = pos[start] == 0;
    const float* win = state + (long long)slot * sf; // [K-1][C]
    float wr[DN_KMAX], x[DN_KMAX - 1];
#pragma unroll
    for (int m = 0; m < DN_KMAX; m++) {
        const int j = m - (DN_KMAX - K);
        wr[m] = j >= 0 ? dn_w(w, wdt, c * K + j) : 0.f;
    }
    const int t0 = r0 - start; // the tile's first row within its sequence
#pragma unroll
    for (int m = 0; m < DN_KMAX - 1; m++) {
        const int u = t0 - (DN_KMAX - 1) + m; // sequence-relative input
        float v = 0.f;
        if (u >= 0) v = in[(long long)(start + u) * C + c];
        else if (u >= -(K - 1) && !fresh) v = win[(long long)(u + K - 1) * C + c];
        x[m] = v;
    }
    for (int i = 0; i < n; i++) {
        const long long r = r0 + i;
        const float cur = in[r * C + c];
        float acc = 0.f;
#pragma unroll
        for (int m = 0; m < DN_KMAX - 1; m++) acc += wr[m] * x[m];
        acc += wr[DN_KMAX - 1] * cur;
#pragma unroll
        for (int m = 0; m < DN_KMAX - 2; m++) x[m] = x[m + 1];
        x[DN_KMAX - 2] = cur;
        xs[r * C + c] = acc / (1.f + expf(-acc));
    }
}

// dn_window moves sequence (start, len)'s conv window to its last K-1
// inputs: from in where the sequence has them, else the old window's
// later rows (a sequence of fewer than K-1 tokens). Row m takes old row
// len+m > m, which ascending m has not overwritten yet; one thread owns a
// channel's rows, and the blocks of the sequence (bi of nb) share the
// channels. deltanet_conv, which reads the old window, has finished: the
// scan waited for it.
DEV void dn_window(float* win, const float* in, int start, int len, bool fresh, int C, int K, int bi, int nb) {
    for (int c = bi * blockDim.x + threadIdx.x; c < C; c += nb * blockDim.x) {
        for (int m = 0; m < K - 1; m++) {
            const int u = len - (K - 1) + m;
            float v = 0.f;
            if (u >= 0) v = in[(long long)(start + u) * C + c];
            else if (!fresh) v = win[(long long)(u + K - 1) * C + c];
            win[(long long)m * C + c] = v;
        }
    }
}

// dn_cp4 copies a float global -> shared by cp.async, or writes a zero
// when ok is false (g is then not read).
DEV void dn_cp4(float* s, const float* g, bool ok) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(fa_smem(s)), "l"(g), "r"(ok ? 4 : 0));
}

// dn_stage_qk writes the q and k of key head kh at rows row0..row0+L-1,
// L2-normalised (eps 1e-6 inside the root) and q also times KDim^-0.5,
// to sq and sk (ld floats a row), zero from KDim to w and for rows L to
// nrows-1. The rows land by cp.async all at once (one memory latency, not
// one per vector), then a warp a vector scales them in place. With inv,
// it also writes each row's factors there (q's at inv[t*istride], k's
// after it). Every thread of the block calls it; it ends with a barrier.
DEV void dn_stage_qk(float* sq, float* sk, int ld, int w, const float* xs, long long row0, int L, int nrows, int C, int KH,
        int KD, int kh, float* inv = nullptr, int istride = 0) {
    for (int e = threadIdx.x; e < nrows * w; e += blockDim.x) {
        const int t = e / w, i = e % w;
        const bool ok = t < L && i < KD;
        const float* g = xs + (row0 + (ok ? t : 0)) * C + kh * KD + (ok ? i : 0);
        dn_cp4(sq + t * ld + i, g, ok);
        dn_cp4(sk + t * ld + i, g + KH * KD, ok);
    }
    fa_commit();
    fa_wait0();
    __syncthreads();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    const float qscale = 1.f / sqrtf((float)KD);
    for (int e = warp; e < 2 * L; e += nw) {
        const int t = e >> 1, isk = e & 1;
        float* d = (isk ? sk : sq) + (long long)t * ld;
        float ss = 0.f;
        for (int i = lane; i < w; i += 32) ss += d[i] * d[i]; // (zero past KDim)
        ss = warp_sum(ss);
        const float f = (1.f / sqrtf(ss + 1e-6f)) * (isk ? 1.f : qscale);
        for (int i = lane; i < w; i += 32) d[i] *= f;
        if (inv && lane == 0) inv[(long long)t * istride + isk] = f;
    }
    __syncthreads();
}

// dn_gate returns row r's log decay for value head h, -exp(A_log) *
// softplus(a + dt_bias) (A = exp(A_log)), and sets beta = sigmoid(b).
DEV float dn_gate(const float* ga, const float* gb, long long r, int h, int VH, float A, float bias, float* beta) {
    const float x = ga[r * VH + h] + bias;
    const float sp = x > 20.f ? x : log1pf(expf(x));
    *beta = 1.f / (1.f + expf(-gb[r * VH + h]));
    return -A * sp;
}

// deltanet_scan_impl runs value head blockIdx.y over sequence blockIdx.z
// for the CT value columns of tile blockIdx.x. Thread (col, part) holds
// rows i = r*RP + part (r < R) of column col: R*RP >= KDim, rows past
// KDim are zero in k and q, so their state stays zero. Per position, with
// the gates and the normalised q, k staged in shared memory DN_LC
// positions at a time:
//   S *= decay; m = k·S[:,j]; d = beta*(v_j - m); S[:,j] += k*d; y_j = q·S[:,j]
// the two column sums finished by shuffles among the RP threads (adjacent
// lanes). Interleaved rows keep the RP lanes' shared-memory reads of k and
// q in distinct banks.
template <int R, int RP>
DEV void deltanet_scan_impl(float* out, int ldo, const float* xs, const float* in, const float* ga, const float* gb,
        const float* alog, const float* dtb, float* state, int sf, const int* pos, const int* sinfo, int cmin, int KH,
        int VH, int KD, int VD, int K) {
    constexpr int KP = R * RP, CT = DN_THREADS / RP;
    __shared__ float sq[DN_LC][KP], sk[DN_LC][KP], sv[DN_LC][CT], sdec[DN_LC], sbeta[DN_LC];
    const int s = blockIdx.z, h = blockIdx.y, tid = threadIdx.x;
    const int start = sinfo[3 * s], len = sinfo[3 * s + 1], slot = sinfo[3 * s + 2];
    if (len >= cmin) return; // deltanet_chunk_scan's
    const bool fresh = pos[start] == 0;
    const int C = 2 * KH * KD + VH * VD, kh = h / (VH / KH);
    const int col = tid / RP, part = tid % RP, j = blockIdx.x * CT + col;
    const bool jok = j < VD;
    float* base = state + (long long)slot * sf;
    float* S = base + (long long)(K - 1) * C + (long long)h * KD * VD;
    float st[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int i = r * RP + part;
        st[r] = (!fresh && jok && i < KD) ? S[(long long)i * VD + j] : 0.f;
    }
    const float A = expf(alog[h]), bias = dtb[h];
    for (int c0 = 0; c0 < len; c0 += DN_LC) {
        const int L = min(DN_LC, len - c0);
        dn_stage_qk(&sq[0][0], &sk[0][0], KP, KP, xs, start + c0, L, L, C, KH, KD, kh);
        for (int e = tid; e < L * CT; e += blockDim.x) {
            const int t = e / CT, cj = blockIdx.x * CT + e % CT;
            sv[t][e % CT] = cj < VD ? xs[(long long)(start + c0 + t) * C + 2 * KH * KD + h * VD + cj] : 0.f;
        }
        if (tid < L) sdec[tid] = expf(dn_gate(ga, gb, start + c0 + tid, h, VH, A, bias, &sbeta[tid]));
        __syncthreads();
        for (int t = 0; t < L; t++) {
            const float dec = sdec[t];
            float m = 0.f;
#pragma unroll
            for (int r = 0; r < R; r++) {
                st[r] *= dec;
                m += st[r] * sk[t][r * RP + part];
            }
#pragma unroll
            for (int o = 1; o < RP; o <<= 1) m += __shfl_xor_sync(0xffffffffu, m, o);
            const float d = (sv[t][col] - m) * sbeta[t];
            float y = 0.f;
#pragma unroll
            for (int r = 0; r < R; r++) {
                st[r] += sk[t][r * RP + part] * d;
                y += st[r] * sq[t][r * RP + part];
            }
#pragma unroll
            for (int o = 1; o < RP; o <<= 1) y += __shfl_xor_sync(0xffffffffu, y, o);
            if (part == 0 && jok) out[(long long)(start + c0 + t) * ldo + h * VD + j] = y;
        }
        __syncthreads(); // the next chunk overwrites the staged values
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int i = r * RP + part;
        if (jok && i < KD) S[(long long)i * VD + j] = st[r];
    }
    dn_window(base, in, start, len, fresh, C, K, blockIdx.y * gridDim.x + blockIdx.x, gridDim.x * gridDim.y);
}

// The scan by padded key dim KP = R*RP: the Go side picks the smallest
// that covers KDim (ops_deltanet.go: deltaScanKernel). 256 takes 8 threads
// a column, so a thread still holds 32 rows (64 spilled registers).
#define DN_SCAN_ARGS float *out, int ldo, const float *xs, const float *in, const float *ga, const float *gb, \
    const float *alog, const float *dtb, float *state, int sf, const int *pos, const int *sinfo, int cmin, int KH, int VH, int KD, int VD, int K
#define DN_SCAN_PASS out, ldo, xs, in, ga, gb, alog, dtb, state, sf, pos, sinfo, cmin, KH, VH, KD, VD, K
extern "C" __global__ void __launch_bounds__(DN_THREADS) deltanet_scan_16(DN_SCAN_ARGS) { grid_dep_start(); deltanet_scan_impl<4, 4>(DN_SCAN_PASS); }
extern "C" __global__ void __launch_bounds__(DN_THREADS) deltanet_scan_32(DN_SCAN_ARGS) { grid_dep_start(); deltanet_scan_impl<8, 4>(DN_SCAN_PASS); }
extern "C" __global__ void __launch_bounds__(DN_THREADS) deltanet_scan_64(DN_SCAN_ARGS) { grid_dep_start(); deltanet_scan_impl<16, 4>(DN_SCAN_PASS); }
extern "C" __global__ void __launch_bounds__(DN_THREADS) deltanet_scan_128(DN_SCAN_ARGS) { grid_dep_start(); deltanet_scan_impl<32, 4>(DN_SCAN_PASS); }
extern "C" __global__ void __launch_bounds__(DN_THREADS) deltanet_scan_256(DN_SCAN_ARGS) { grid_dep_start(); deltanet_scan_impl<32, 8>(DN_SCAN_PASS); }

// gated_sigmoid: d = sigmoid(g) * u over n elements of rows of cols; g
// has gcols columns, cols (elementwise) or 1 (one gate a row: Qwen's
// shared-expert gate). d may alias u, or g when gcols == cols.
extern "C" __global__ void gated_sigmoid(float* d, const float* g, const float* u, long long n, int cols, int gcols) {
    grid_dep_start();
    GRID_STRIDE(i, n) {
        const float sg = 1.f / (1.f + expf(-g[gcols == 1 ? i / cols : i]));
        d[i] = sg * u[i];
    }
}
