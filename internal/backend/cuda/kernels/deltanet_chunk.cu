// The delta rule in chunked form for long sequences (deltanet.cu's scan
// takes the others: a sequence of cmin positions or more in the step runs
// here, ops_deltanet.go). With c the cumulative log decay inside a chunk
// of DNC_L positions and D[t][u] = exp(c_t - c_u) (u <= t):
//
//   Tb = (I + strict_lower(diag(beta) K K^T o D))^-1 diag(beta)
//   P  = lower(Q K^T o D)
//   R  = V - diag(exp(c)) K S;   Vn = Tb R
//   O  = diag(exp(c)) Q S + P Vn
//   S' = exp(c_L) S + (diag(exp(c_L - c)) K)^T Vn
//
// (the CPU backend's deltanet_chunk.go, with W S folded into R). Two
// launches: deltanet_chunk_prep builds Tb, P and c for every chunk and
// value head at once (none of it needs S); deltanet_chunk_scan then runs
// a block per (DNC_CT value columns, value head, sequence) through the
// sequence's chunks in order, its columns of S in shared memory, read from
// the slot once and written once, then moves the conv window on as the
// recurrent scan does. All f32, on the CUDA cores: four products of 64
// rows a chunk, each thread a 4x4 tile of a 64x32 output (dn_mm).

#define DNC_L 64       // positions a chunk
#define DNC_THREADS 128
#define DNC_CT 32      // value columns a scan block
#define DNC_LD 68      // row stride of the 64x64 matrices: 4 consecutive rows in distinct banks

// dnc_kp is the key dim padded to 64 (a whole number of dn_mm row tiles
// in the state update); staged q and k rows are dnc_kp + 4 floats apart.
DEV int dnc_kp(int KD) { return (KD + 63) / 64 * 64; }

extern __shared__ float dnc_sm[];

// dn_mm adds to acc[x][i][j] the sum over k < K of A_x(m, k) B(k, n) for
// the thread's rows m = 16i (+ tr) and columns n = 8j (+ tc) of a 64x32
// tile: A_x(m, k) = ax[m*am + k*ak], B(k, n) = b[k*bk + n*bn], pointers
// already offset to the thread's first row and column. A warp is 8
// columns by 4 consecutive rows, so B loads hit 8 banks and A loads
// broadcast from 4 (given the strides above). NA = 2 shares B's loads
// between two left operands.
template <int NA>
DEV void dn_mm(float (&acc)[NA][4][4], const float* a0, const float* a1, int am, int ak, const float* b, int bk, int bn, int K) {
#pragma unroll 2
    for (int k = 0; k < K; k++) {
        float bv[4];
#pragma unroll
        for (int j = 0; j < 4; j++) bv[j] = b[k * bk + 8 * j * bn];
#pragma unroll
        for (int x = 0; x < NA; x++) {
            const float* a = x ? a1 : a0;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const float av = a[16 * i * am + k * ak];
#pragma unroll
                for (int j = 0; j < 4; j++) acc[x][i][j] = fmaf(av, bv[j], acc[x][i][j]);
            }
        }
    }
}

template <int NA>
DEV void dn_zero(float (&acc)[NA][4][4]) {
#pragma unroll
    for (int x = 0; x < NA; x++)
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 4; j++) acc[x][i][j] = 0.f;
}

// deltanet_chunk_prep: chunk blockIdx.x (the flash query tiles of tile
// rows, tile/DNC_L chunks each, all inside one sequence), value head
// blockIdx.y. Writes, per row r of the chunk and head h, tb and pm rows
// [(r*VH + h)*DNC_L ...] (Tb and P above) and cum[r*VH + h] (c).
extern "C" __global__ void __launch_bounds__(DNC_THREADS) deltanet_chunk_prep(float* tb, float* pm, float* cum, float* invn,
        const float* xs, const float* ga, const float* gb, const float* alog, const float* dtb, const int* tiles, int tile,
        const int* tok2seq, const int* sinfo, int cmin, int KH, int VH, int KD, int C) {
    grid_dep_start();
    const int per = tile / DNC_L, ti = blockIdx.x / per, part = blockIdx.x % per, h = blockIdx.y;
    const int r0 = tiles[2 * ti] + part * DNC_L, L = min(DNC_L, tiles[2 * ti + 1] - part * DNC_L);
    if (L <= 0 || sinfo[3 * tok2seq[r0] + 1] < cmin) return;
    const int tid = threadIdx.x, tr = tid >> 3, tc = tid & 7, ldk = dnc_kp(KD) + 4, kh = h / (VH / KH);
    float *sq = dnc_sm, *sk = sq + DNC_L * ldk, *sa = sk + DNC_L * ldk, *st = sa + DNC_L * DNC_LD;
    float *sc = st + DNC_L * DNC_LD, *sb = sc + DNC_L;
    // The first value head of each key head also keeps q's and k's norm
    // factors for the scan, which stages them raw.
    const bool lead = h % (VH / KH) == 0;
    dn_stage_qk(sq, sk, ldk, ldk, xs, r0, L, DNC_L, C, KH, KD, kh, lead ? invn + ((long long)r0 * KH + kh) * 2 : nullptr, 2 * KH);
    if (tid < DNC_L) {
        float beta = 0.f, g = 0.f; // padding rows: no decay, no update
        if (tid < L) g = dn_gate(ga, gb, r0 + tid, h, VH, expf(alog[h]), dtb[h], &beta);
        sc[tid] = g;
        sb[tid] = beta;
    }
    __syncthreads();
    if (tid == 0) { // in order, as the CPU sums
        float a = 0.f;
        for (int t = 0; t < DNC_L; t++) sc[t] = a += sc[t];
    }
    __syncthreads();
    if (tid < L) cum[(long long)(r0 + tid) * VH + h] = sc[tid];
    // K K^T and Q K^T, 32 columns at a time, scaled by the decays: the
    // system's strict lower part into sa, P straight out.
    for (int n0 = 0; n0 < DNC_L; n0 += 32) {
        float acc[2][4][4];
        dn_zero(acc);
        dn_mm<2>(acc, sk + tr * ldk, sq + tr * ldk, ldk, 1, sk + (n0 + tc) * ldk, 1, ldk, KD);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int m = tr + 16 * i;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int n = n0 + tc + 8 * j;
                const float d = n <= m ? expf(sc[m] - sc[n]) : 0.f;
                sa[m * DNC_LD + n] = n < m ? sb[m] * acc[0][i][j] * d : 0.f;
                if (m < L) pm[((long long)(r0 + m) * VH + h) * DNC_L + n] = acc[1][i][j] * d;
            }
        }
    }
    __syncthreads();
    // (I + A)^-1 by forward substitution, a thread a column: row i of
    // column c is -sum_{c <= u < i} A[i][u] T[u][c] below the unit diagonal.
    if (tid < DNC_L) {
        const int c = tid;
        for (int i = 0; i < DNC_L; i++) {
            float x = i == c ? 1.f : 0.f;
            if (i > c) {
                float a0 = 0.f, a1 = 0.f;
                int u = c;
                for (; u + 1 < i; u += 2) {
                    a0 = fmaf(sa[i * DNC_LD + u], st[u * DNC_LD + c], a0);
                    a1 = fmaf(sa[i * DNC_LD + u + 1], st[(u + 1) * DNC_LD + c], a1);
                }
                if (u < i) a0 = fmaf(sa[i * DNC_LD + u], st[u * DNC_LD + c], a0);
                x = -(a0 + a1);
            }
            st[i * DNC_LD + c] = x;
        }
    }
    __syncthreads();
    for (int e = tid; e < L * DNC_L; e += blockDim.x) {
        const int i = e / DNC_L, c = e % DNC_L;
        tb[((long long)(r0 + i) * VH + h) * DNC_L + c] = st[i * DNC_LD + c] * sb[c];
    }
}

// deltanet_chunk_scan: value columns blockIdx.x*DNC_CT.. of head
// blockIdx.y over sequence blockIdx.z's chunks (sequences of fewer than
// cmin positions are the recurrent scan's). A chunk's q, k, v, Tb and P
// land by cp.async all at once (zero past KDim, VDim and the chunk's
// rows, so padding rows change nothing); q's and k's norm factors (invn,
// from the prep) and the decays are folded into per-row factors of the
// products instead: fq = exp(c) nq, fk = exp(c) nk, fd = exp(c_L - c) nk.
extern "C" __global__ void __launch_bounds__(DNC_THREADS) deltanet_chunk_scan(float* out, int ldo, const float* xs,
        const float* in, const float* tb, const float* pm, const float* cum, const float* invn, float* state, int sf,
        const int* pos, const int* sinfo, int cmin, int KH, int VH, int KD, int VD, int K) {
    grid_dep_start();
    const int s = blockIdx.z, h = blockIdx.y, tid = threadIdx.x, tr = tid >> 3, tc = tid & 7;
    const int start = sinfo[3 * s], len = sinfo[3 * s + 1], slot = sinfo[3 * s + 2];
    if (len < cmin) return;
    const bool fresh = pos[start] == 0;
    const int C = 2 * KH * KD + VH * VD, kh = h / (VH / KH), j0 = blockIdx.x * DNC_CT;
    const int KP = dnc_kp(KD), ldk = KP + 4;
    float *sq = dnc_sm, *sk = sq + DNC_L * ldk, *sS = sk + DNC_L * ldk, *sR = sS + KP * DNC_CT;
    float *sV = sR + DNC_L * DNC_CT, *sVd = sV + DNC_L * DNC_CT, *sT = sVd + DNC_L * DNC_CT, *sP = sT + DNC_L * DNC_LD;
    float *fq = sP + DNC_L * DNC_LD, *fk = fq + DNC_L, *fd = fk + DNC_L;
    float* base = state + (long long)slot * sf;
    float* S = base + (long long)(K - 1) * C + (long long)h * KD * VD;
    for (int e = tid; e < KP * DNC_CT; e += blockDim.x) {
        const int i = e / DNC_CT, j = j0 + e % DNC_CT;
        sS[e] = (!fresh && i < KD && j < VD) ? S[(long long)i * VD + j] : 0.f;
    }
    for (int c0 = 0; c0 < len; c0 += DNC_L) {
        const int L = min(DNC_L, len - c0);
        const long long r0 = start + c0;
        for (int e = tid; e < DNC_L * KP; e += blockDim.x) {
            const int t = e / KP, i = e % KP;
            const bool ok = t < L && i < KD;
            const float* g = xs + (r0 + (ok ? t : 0)) * C + kh * KD + (ok ? i : 0);
            dn_cp4(sq + t * ldk + i, g, ok);
            dn_cp4(sk + t * ldk + i, g + KH * KD, ok);
        }
        for (int e = tid; e < DNC_L * DNC_CT; e += blockDim.x) {
            const int t = e / DNC_CT, j = j0 + e % DNC_CT;
            const bool ok = t < L && j < VD;
            dn_cp4(sR + e, xs + (r0 + (ok ? t : 0)) * C + 2 * KH * KD + h * VD + (ok ? j : 0), ok);
        }
        for (int e = tid; e < DNC_L * DNC_L; e += blockDim.x) {
            const int t = e / DNC_L, u = e % DNC_L;
            const long long g = ((r0 + (t < L ? t : 0)) * VH + h) * DNC_L + u;
            dn_cp4(sT + t * DNC_LD + u, tb + g, t < L);
            dn_cp4(sP + t * DNC_LD + u, pm + g, t < L);
        }
        fa_commit();
        const float cL = cum[(r0 + L - 1) * VH + h];
        if (tid < DNC_L) {
            float q = 0.f, k = 0.f, e = 0.f, d = 0.f;
            if (tid < L) {
                const long long r = r0 + tid;
                const float c = cum[r * VH + h];
                q = invn[(r * KH + kh) * 2];
                k = invn[(r * KH + kh) * 2 + 1];
                e = expf(c);
                d = expf(cL - c);
            }
            fq[tid] = e * q;
            fk[tid] = e * k;
            fd[tid] = d * k;
        }
        fa_wait0();
        __syncthreads();
        // K S and Q S together (one pass over S): R = V - exp(c) K S in
        // place of V (each thread rewrites only its own elements), the
        // state's part of O kept in registers.
        float o[4][4];
        {
            float acc[2][4][4];
            dn_zero(acc);
            dn_mm<2>(acc, sk + tr * ldk, sq + tr * ldk, ldk, 1, sS + tc, DNC_CT, 1, KD);
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int t = tr + 16 * i;
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    float* r = &sR[t * DNC_CT + tc + 8 * j];
                    *r -= fk[t] * acc[0][i][j];
                    o[i][j] = acc[1][i][j] * fq[t];
                }
            }
        }
        __syncthreads();
        {
            float acc[1][4][4];
            dn_zero(acc);
            dn_mm<1>(acc, sT + tr * DNC_LD, nullptr, DNC_LD, 1, sR + tc, DNC_CT, 1, DNC_L);
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int t = tr + 16 * i;
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    sV[t * DNC_CT + tc + 8 * j] = acc[0][i][j];
                    sVd[t * DNC_CT + tc + 8 * j] = acc[0][i][j] * fd[t];
                }
            }
        }
        __syncthreads();
        {
            float acc[1][4][4];
            dn_zero(acc);
            dn_mm<1>(acc, sP + tr * DNC_LD, nullptr, DNC_LD, 1, sV + tc, DNC_CT, 1, DNC_L);
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int t = tr + 16 * i;
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const int jj = j0 + tc + 8 * j;
                    if (t < L && jj < VD) out[(r0 + t) * ldo + h * VD + jj] = o[i][j] + acc[0][i][j];
                }
            }
        }
        const float eL = expf(cL);
        for (int i0 = 0; i0 < KP; i0 += 64) {
            float acc[1][4][4];
            dn_zero(acc);
            dn_mm<1>(acc, sk + i0 + tr, nullptr, 1, ldk, sVd + tc, DNC_CT, 1, DNC_L);
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    float* p = &sS[(i0 + tr + 16 * i) * DNC_CT + tc + 8 * j];
                    *p = eL * *p + acc[0][i][j];
                }
        }
        __syncthreads(); // the next chunk restages q, k, v and reads S
    }
    for (int e = tid; e < KP * DNC_CT; e += blockDim.x) {
        const int i = e / DNC_CT, j = j0 + e % DNC_CT;
        if (i < KD && j < VD) S[(long long)i * VD + j] = sS[e];
    }
    dn_window(base, in, start, len, fresh, C, K, blockIdx.y * gridDim.x + blockIdx.x, gridDim.x * gridDim.y);
}
