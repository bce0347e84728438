/* Conv2d's kernels (src/layers/conv2d/, a file per family of algorithms). Around the GEMM:
 * im2col into a row-per-output-pixel matrix, the row-matrix to NCHW scatter with bias, the NCHW
 * gradient to row-matrix gather and col2im; then the direct kernels, the weight gradients and
 * the fused pool's. Shapes: x (N,C,H,W), y (N,OC,OH,OW); a "row matrix" has one row per output
 * pixel (n,oh,ow) of the current chunk and C*K*K (col) or OC (rows) columns. */

/* col[(n*OH*OW + oh*OW + ow) * CKK + (c*K + kh)*K + kw] = x[n0+n, c, oh*s-p+kh, ow*s-p+kw] or 0.
 * One work-item per output pixel writes its whole row: index arithmetic once per pixel and
 * contiguous stores, which is what CPU devices need (per-element division cost 10x more). */
__kernel void im2col(__global float *col, __global const float *x, int xoff, int n0, int nimg,
                     int C, int H, int W, int K, int stride, int pad, int OH, int OW) {
    int r = get_global_id(0);
    if (r >= nimg * OH * OW) return;
    int ow = r % OW, oh = (r / OW) % OH, n = r / (OW * OH);
    int ih0 = oh * stride - pad, iw0 = ow * stride - pad;
    __global float *dst = col + (long)r * C * K * K;
    __global const float *src = x + xoff + (long)(n0 + n) * C * H * W;
    for (int c = 0; c < C; c++) {
        for (int kh = 0; kh < K; kh++) {
            int ih = ih0 + kh;
            if (ih < 0 || ih >= H) {
                for (int kw = 0; kw < K; kw++) *dst++ = 0.0f;
                continue;
            }
            __global const float *row = src + (c * H + ih) * W;
            for (int kw = 0; kw < K; kw++) {
                int iw = iw0 + kw;
                *dst++ = iw >= 0 && iw < W ? row[iw] : 0.0f;
            }
        }
    }
}

/* y[n0+n, oc, p] = rows[(n*OHW + p)*OC + oc] + (has_bias ? b[boff + oc] : 0) */
__kernel void rows_to_nchw_bias(__global float *y, int yoff, __global const float *rows,
                                __global const float *b, int boff, int has_bias, int n0, int nimg,
                                int OC, int OHW) {
    int i = get_global_id(0);
    if (i >= nimg * OC * OHW) return;
    int p = i % OHW, oc = (i / OHW) % OC, n = i / (OHW * OC);
    float v = rows[(n * OHW + p) * OC + oc];
    if (has_bias) v += b[boff + oc];
    y[yoff + (n0 * OC) * OHW + i] = v;
}

/* rows[(n*OHW + p)*OC + oc] = gy[n0+n, oc, p] */
__kernel void nchw_to_rows(__global float *rows, __global const float *gy, int gyoff, int n0,
                           int nimg, int OC, int OHW) {
    int i = get_global_id(0);
    if (i >= nimg * OC * OHW) return;
    int oc = i % OC, r = i / OC;
    int p = r % OHW, n = r / OHW;
    rows[i] = gy[gyoff + ((n0 + n) * OC + oc) * OHW + p];
}

/* gx[n0+n, c, ih, iw] = sum of the dcol entries that im2col copied from that pixel. A gather
 * (one work-item per input pixel) keeps the sum order fixed: no atomics, repeatable runs. The
 * outputs whose window covers ih are oh in [ceil((ih+pad-K+1)/s), (ih+pad)/s], so the loops
 * visit only contributing taps. */
__kernel void col2im(__global float *gx, int gxoff, __global const float *dcol, int n0, int nimg,
                     int C, int H, int W, int K, int stride, int pad, int OH, int OW) {
    int i = get_global_id(0);
    if (i >= nimg * C * H * W) return;
    int iw = i % W, ih = (i / W) % H, c = (i / (W * H)) % C, n = i / (W * H * C);
    int CKK = C * K * K;
    int oh_lo = max(0, (ih + pad - K + stride) / stride), oh_hi = min(OH - 1, (ih + pad) / stride);
    int ow_lo = max(0, (iw + pad - K + stride) / stride), ow_hi = min(OW - 1, (iw + pad) / stride);
    float acc = 0.0f;
    for (int oh = oh_lo; oh <= oh_hi; oh++) {
        int kh = ih + pad - oh * stride;
        __global const float *base = dcol + (long)(n * OH + oh) * OW * CKK + (c * K + kh) * K;
        for (int ow = ow_lo; ow <= ow_hi; ow++) acc += base[ow * CKK + iw + pad - ow * stride];
    }
    gx[gxoff + n0 * C * H * W + i] = acc;
}

/* wf[c, oc, kh, kw] = w[woff + oc, c, K-1-kh, K-1-kw]: the weights of the convolution whose
 * forward pass is this layer's input gradient (stride 1: gx = conv(gy, wf, pad K-1-pad)). */
__kernel void flip_weights(__global float *wf, __global const float *w, int woff, int OC, int C,
                           int K) {
    /* one work-item per (c, oc) pair: K*K contiguous reads (backwards), K*K contiguous writes */
    int p = get_global_id(0);
    if (p >= OC * C) return;
    int oc = p % OC, c = p / OC, kk = K * K;
    __global const float *src = w + woff + (oc * C + c) * kk + kk - 1;
    __global float *dst = wf + p * kk;
    for (int t = 0; t < kk; t++) dst[t] = src[-t];
}

/* xp[nc, h, w] = x[nc, h - pad, w - pad] or 0: the zero-padded input of a convolution, so the
 * direct kernels below need no bounds checks. One work-item per work-group pads `per` whole
 * planes (several when they are small), each row copied in vector chunks; the one with the last
 * plane also zeroes the `slack` floats past the data, which the kernels read in lanes they do
 * not store (the weight gradient multiplies those lanes by zeros, and 0 * NaN from left-over
 * bytes would poison its sums). On PoCL this ran at 17-21 GB/s on large planes, against ~15
 * for one work-item per padded row and ~5 for one per element. global = ceil(NC/per). */
static void pad_plane(__global float *dst, __global const float *src, int H, int W, int pad,
                      int Hp, int Wp) {
    int edge = pad * Wp + pad; /* zeros above the first row's data */
    for (int i = 0; i < edge; i++) dst[i] = 0.0f;
    for (int h = 0; h < H; h++) {
        __global float *d = dst + (pad + h) * Wp + pad;
        __global const float *s = src + h * W;
        int w = 0;
        for (; w + 16 <= W; w += 16) vstore16(vload16(0, s + w), 0, d + w);
        if (w + 8 <= W) vstore8(vload8(0, s + w), 0, d + w), w += 8;
        if (w + 4 <= W) vstore4(vload4(0, s + w), 0, d + w), w += 4;
        for (; w < W; w++) d[w] = s[w];
        for (int i = 0; i < 2 * pad; i++) d[W + i] = 0.0f; /* right pad, next row's left */
    }
    __global float *b = dst + (pad + H) * Wp + pad; /* the rows below the data */
    int rest = (Hp - pad - H) * Wp - pad, i = 0;
    for (; i + 16 <= rest; i += 16) vstore16((float16)(0.0f), 0, b + i);
    for (; i < rest; i++) b[i] = 0.0f;
}

__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void pad_input(
    __global float *xp, __global const float *x, int xoff, int NC, int H, int W, int pad, int Hp,
    int Wp, int slack, int per) {
    int nc = get_global_id(0) * per, end = min(NC, nc + per);
    for (; nc < end; nc++)
        pad_plane(xp + (long)nc * Hp * Wp, x + xoff + (long)nc * H * W, H, W, pad, Hp, Wp);
    if (end == NC)
        for (int i = 0; i < slack; i++) xp[(long)NC * Hp * Wp + i] = 0.0f;
}

/* Direct ("implicit GEMM") stride-1 convolution shaped for CPU devices: one work-item per
 * work-group owns 8 output channels x 2 output rows x 16 output columns in sixteen float16
 * accumulators; every (c, kh, kw) tap is two unaligned vload16s of the padded input and eight
 * broadcast weights into explicit fmas. No im2col matrix is built and the output lands in
 * NCHW with its bias, or, with pool != 0, goes through a fused MaxPool2d(2) first (POOL_ROW,
 * below). Lanes and rows past the edge are computed from in-bounds (slack) memory and not
 * stored; channels past OC reuse the last channel's weights and are not stored.
 * A work-item may take several tiles (below). */
/* Shared set-up of the direct kernels: one weight base pointer per output channel (channels past
 * OC reuse the last one; their results are not stored), so each tap is a plain indexed
 * broadcast load, and the sixteen accumulators. */
#define DIRECT_SETUP                                                                               \
    int ckk = C * K * K, last = OC - 1;                                                            \
    __global const float *w0 = w + woff + min(oc0 + 0, last) * ckk;                                \
    __global const float *w1 = w + woff + min(oc0 + 1, last) * ckk;                                \
    __global const float *w2 = w + woff + min(oc0 + 2, last) * ckk;                                \
    __global const float *w3 = w + woff + min(oc0 + 3, last) * ckk;                                \
    __global const float *w4 = w + woff + min(oc0 + 4, last) * ckk;                                \
    __global const float *w5 = w + woff + min(oc0 + 5, last) * ckk;                                \
    __global const float *w6 = w + woff + min(oc0 + 6, last) * ckk;                                \
    __global const float *w7 = w + woff + min(oc0 + 7, last) * ckk;                                \
    float16 a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;                        \
    float16 b0 = 0, b1 = 0, b2 = 0, b3 = 0, b4 = 0, b5 = 0, b6 = 0, b7 = 0;

#define ACC_ROW(r)                                                                                 \
    {                                                                                              \
        float16 wv = (float16)(w##r[tap]);                                                         \
        a##r = fma(wv, v0, a##r);                                                                  \
        b##r = fma(wv, v1, b##r);                                                                  \
    }
/* The taps of one work-item: for every input channel and kernel row, KC kernel columns, each
 * two input vectors (LOAD_V(), per kernel) and eight broadcast weights into sixteen fmas.
 * conv_direct_s1 calls it with KC = 5 and 3 for those kernels (DIRECT_ALL_TAPS), so the column
 * loop unrolls and the weights' offsets are immediates: on PoCL that ran seed's 5x5 layers
 * 6-8% faster than the loop over a run-time K. conv_direct_s1_w8's four 8-wide loads ran 20%
 * slower unrolled, so it keeps the loop. */
#define DIRECT_TAPS(KC, LOAD_V, UNROLL)                                                            \
    for (int c = 0; c < C; c++) {                                                                  \
        __global const float *plane = xp + ((n * C + c) * Hp + oh0) * Wp + ow0;                    \
        for (int kh = 0; kh < KC; kh++) {                                                          \
            __global const float *r0 = plane + kh * Wp;                                            \
            int tap = (c * KC + kh) * KC;                                                          \
            UNROLL for (int kw = 0; kw < KC; kw++, tap++) {                                        \
                LOAD_V()                                                                           \
                ACC_ROW(0) ACC_ROW(1) ACC_ROW(2) ACC_ROW(3)                                        \
                ACC_ROW(4) ACC_ROW(5) ACC_ROW(6) ACC_ROW(7)                                        \
            }                                                                                      \
        }                                                                                          \
    }
#define DIRECT_ALL_TAPS(LOAD_V)                                                                    \
    if (K == 5) {                                                                                  \
        DIRECT_TAPS(5, LOAD_V, _Pragma("unroll"))                                                  \
    } else if (K == 3) {                                                                           \
        DIRECT_TAPS(3, LOAD_V, _Pragma("unroll"))                                                  \
    } else {                                                                                       \
        DIRECT_TAPS(K, LOAD_V, )                                                                   \
    }
/* the input vectors of conv_direct_s1 (two rows of 16) and conv_direct_s1_w8 (four of 8) */
#define LOAD_16() float16 v0 = vload16(0, r0 + kw), v1 = vload16(0, r0 + Wp + kw);
#define LOAD_8X4()                                                                                 \
    __global const float *q = r0 + kw;                                                             \
    float16 v0 = (float16)(vload8(0, q), vload8(0, q + Wp));                                       \
    float16 v1 = (float16)(vload8(0, q + 2 * Wp), vload8(0, q + 3 * Wp));

#define STORE_ROW(r)                                                                               \
    if (oc0 + r < OC) {                                                                            \
        float bias = has_bias ? w[boff + oc0 + r] : 0.0f;                                          \
        __global float *yp = y + yoff + ((n * OC + oc0 + r) * OH + oh0) * OW + ow0;                \
        float16 s0 = a##r + bias, s1 = b##r + bias;                                                \
        if (full) {                                                                                \
            vstore16(s0, 0, yp);                                                                   \
            if (two) vstore16(s1, 0, yp + OW);                                                     \
        } else {                                                                                   \
            float t0[16], t1[16];                                                                  \
            vstore16(s0, 0, t0);                                                                   \
            vstore16(s1, 0, t1);                                                                   \
            for (int q = 0; q < nw; q++) {                                                         \
                yp[q] = t0[q];                                                                     \
                if (two) yp[OW + q] = t1[q];                                                       \
            }                                                                                      \
        }                                                                                          \
    }

/* The first `count` (1..8) lanes of v at p. */
static void store_first(float8 v, __global float *p, int count) {
    if (count == 8) {
        vstore8(v, 0, p);
        return;
    }
    float t[8];
    vstore8(v, 0, t);
    for (int j = 0; j < count; j++) p[j] = t[j];
}

/* m and best (declared by the caller, IT its int vector type) = the maximum of windows
 * p00..p11 taken in scan order, strict '>', a NaN wins, and its offset (0, 1, W, W + 1) */
#define POOL_MAX4(IT, p00, p01, p10, p11, W, m, best)                                              \
    {                                                                                              \
        IT c_;                                                                                     \
        m = p00, best = (IT)(0);                                                                   \
        c_ = (p01 > m) | isnan(p01);                                                               \
        m = select(m, p01, c_), best = select(best, (IT)(1), c_);                                  \
        c_ = (p10 > m) | isnan(p10);                                                               \
        m = select(m, p10, c_), best = select(best, (IT)(W), c_);                                  \
        c_ = (p11 > m) | isnan(p11);                                                               \
        m = select(m, p11, c_), best = select(best, (IT)((W) + 1), c_);                            \
    }

/* MaxPool2d(2) fused into the store (pool != 0): y is then the pooled output (N, OC, PH, PW)
 * with PH = OH/2, PW = OW/2, and argmax records, as maxpool2_forward does, the index of each
 * window's maximum in the OH x OW plane: scan order (0,0), (0,1), (1,0), (1,1), strict '>',
 * a NaN wins. The values pooled are exactly those the unfused store would write. Eight
 * windows at once: p00..p11 hold each window's four values, base the plane index of each
 * window's top-left pixel; the first `count` results are stored (values at y unless y is 0,
 * argmaxes at am), and returned. The callers with hand >= 0 store them also into ypad, the next
 * convolution's padded input: planes of (PH + 2*hand) x (PW + 2*hand) as pad_input writes them,
 * whose zeros are already there (the padded hand-off); with `only`, there alone (nothing
 * reads y). */
float8 pool8_store(float8 p00, float8 p01, float8 p10, float8 p11, int8 base, int W,
                   __global float *y, __global int *am, int count) {
    float8 m;
    int8 best;
    POOL_MAX4(int8, p00, p01, p10, p11, W, m, best)
    int8 idx = base + best;
    if (count == 8) {
        if (y) vstore8(m, 0, y);
        vstore8(idx, 0, am);
        return m;
    }
    if (y) store_first(m, y, count);
    int ti[8];
    vstore8(idx, 0, ti);
    for (int j = 0; j < count; j++) am[j] = ti[j];
    return m;
}

#define POOL_ROW(r)                                                                                \
    if (oc0 + r < OC && two) {                                                                     \
        float bias = has_bias ? w[boff + oc0 + r] : 0.0f;                                          \
        float16 s0 = a##r + bias, s1 = b##r + bias;                                                \
        int ph = oh0 / 2, pw0 = ow0 / 2;                                                           \
        long o = ((long)(n * OC + oc0 + r) * PH + ph) * PW + pw0;                                  \
        int8 base = 2 * ph * OW + 2 * pw0 + 2 * (int8)(0, 1, 2, 3, 4, 5, 6, 7);                    \
        int cnt = min(8, PW - pw0);                                                                \
        float8 m = pool8_store(s0.even, s0.odd, s1.even, s1.odd, base, OW,                         \
                               only ? 0 : y + yoff + o, argmax + o, cnt);                          \
        if (hand >= 0) {                                                                           \
            long q = ((long)(n * OC + oc0 + r) * (PH + 2 * hand) + ph + hand) * (PW + 2 * hand);   \
            store_first(m, ypad + q + pw0 + hand, cnt);                                            \
        }                                                                                          \
    }

/* One tile of conv_direct_s1: tile t of the output plane (16 columns x 2 rows), channels
 * oc0.. oc0+7, image n. */
static void direct_tile(__global float *y, int yoff, __global const float *xp,
                        __global const float *w, int woff, int boff, int has_bias, int C, int Hp,
                        int Wp, int OC, int K, int OH, int OW, __global int *argmax, int pool,
                        __global float *ypad, int hand, int only, int t, int oc0, int n) {
    int tiles_w = (OW + 15) / 16;
    int ow0 = (t % tiles_w) * 16, oh0 = (t / tiles_w) * 2;
    if (oh0 >= OH || oc0 >= OC) return;
    DIRECT_SETUP
    DIRECT_ALL_TAPS(LOAD_16)
    int nw = min(16, OW - ow0), full = nw == 16, two = oh0 + 1 < OH;
    if (pool) {
        int PH = OH / 2, PW = OW / 2;
        POOL_ROW(0) POOL_ROW(1) POOL_ROW(2) POOL_ROW(3)
        POOL_ROW(4) POOL_ROW(5) POOL_ROW(6) POOL_ROW(7)
        return;
    }
    STORE_ROW(0) STORE_ROW(1) STORE_ROW(2) STORE_ROW(3)
    STORE_ROW(4) STORE_ROW(5) STORE_ROW(6) STORE_ROW(7)
}

/* `per` consecutive tiles per work-item (tiles past the plane are skipped). ypad, hand and
 * only: the padded hand-off of the fused pool (hand < 0: none; ypad is then not touched).
 * global = (ceil(ceil(OW/16) * ceil(OH/2) / per), ceil(OC/8), N). */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void conv_direct_s1(
    __global float *y, int yoff, __global const float *xp, __global const float *w, int woff,
    int boff, int has_bias, int C, int Hp, int Wp, int OC, int K, int OH, int OW,
    __global int *argmax, int pool, __global float *ypad, int hand, int only, int per) {
    int oc0 = get_global_id(1) * 8, n = get_global_id(2);
    for (int t = get_global_id(0) * per, end = t + per; t < end; t++)
        direct_tile(y, yoff, xp, w, woff, boff, has_bias, C, Hp, Wp, OC, K, OH, OW, argmax, pool,
                    ypad, hand, only, t, oc0, n);
}

/* The same for outputs at most 8 wide (8x8 and 7x7 maps and the like), where a float16 would
 * be half empty or worse: a float16 holds two 8-lane output rows, so a work-item owns 8
 * channels x 4 rows x 8 columns; lanes past OW are computed from slack and not stored. The
 * fused pool (pool != 0) needs OW == 8. global = (ceil(OH/4), ceil(OC/8), N). */
#define STORE_ROW8(r)                                                                              \
    if (oc0 + r < OC) {                                                                            \
        float bias = has_bias ? w[boff + oc0 + r] : 0.0f;                                          \
        __global float *yp = y + yoff + ((n * OC + oc0 + r) * OH + oh0) * OW;                      \
        float16 s0 = a##r + bias, s1 = b##r + bias;                                                \
        if (OW == 8) {                                                                             \
            vstore8(s0.lo, 0, yp);                                                                 \
            if (rows > 1) vstore8(s0.hi, 0, yp + 8);                                               \
            if (rows > 2) vstore8(s1.lo, 0, yp + 16);                                              \
            if (rows > 3) vstore8(s1.hi, 0, yp + 24);                                              \
        } else {                                                                                   \
            float t[32];                                                                           \
            vstore16(s0, 0, t);                                                                    \
            vstore16(s1, 0, t + 16);                                                               \
            for (int i = 0; i < rows; i++)                                                         \
                for (int q = 0; q < OW; q++) yp[i * OW + q] = t[i * 8 + q];                        \
        }                                                                                          \
    }

/* The fused 2x2 pool of the 8-wide kernel: rows oh0..oh0+3 give pooled rows oh0/2 and
 * oh0/2 + 1, 4 wide each and adjacent in y, so one 8-window call covers both (in a padded
 * hand-off, two rows of the padded plane). */
#define POOL_ROW8(r)                                                                               \
    if (oc0 + r < OC && ph0 < PH) {                                                                \
        float bias = has_bias ? w[boff + oc0 + r] : 0.0f;                                          \
        float16 s0 = a##r + bias, s1 = b##r + bias;                                                \
        long o = ((long)(n * OC + oc0 + r) * PH + ph0) * 4;                                        \
        float8 m = pool8_store((float8)(s0.lo.even, s1.lo.even), (float8)(s0.lo.odd, s1.lo.odd),   \
                               (float8)(s0.hi.even, s1.hi.even), (float8)(s0.hi.odd, s1.hi.odd),   \
                               base, 8, only ? 0 : y + yoff + o, argmax + o, ph0 + 1 < PH ? 8 : 4);\
        if (hand >= 0) {                                                                           \
            int wq = 4 + 2 * hand;                                                                 \
            __global float *d =                                                                    \
                ypad + ((long)(n * OC + oc0 + r) * (PH + 2 * hand) + ph0 + hand) * wq + hand;      \
            vstore4(m.lo, 0, d);                                                                   \
            if (ph0 + 1 < PH) vstore4(m.hi, 0, d + wq);                                            \
        }                                                                                          \
    }

__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void conv_direct_s1_w8(
    __global float *y, int yoff, __global const float *xp, __global const float *w, int woff,
    int boff, int has_bias, int C, int Hp, int Wp, int OC, int K, int OH, int OW,
    __global int *argmax, int pool, __global float *ypad, int hand, int only) {
    int oh0 = get_global_id(0) * 4, oc0 = get_global_id(1) * 8, n = get_global_id(2), ow0 = 0;
    if (oh0 >= OH || oc0 >= OC) return;
    DIRECT_SETUP
    DIRECT_TAPS(K, LOAD_8X4, )
    if (pool) {
        int PH = OH / 2, ph0 = oh0 / 2;
        int8 base = 16 * ph0 + (int8)(0, 2, 4, 6, 16, 18, 20, 22);
        POOL_ROW8(0) POOL_ROW8(1) POOL_ROW8(2) POOL_ROW8(3)
        POOL_ROW8(4) POOL_ROW8(5) POOL_ROW8(6) POOL_ROW8(7)
        return;
    }
    int rows = min(4, OH - oh0);
    STORE_ROW8(0) STORE_ROW8(1) STORE_ROW8(2) STORE_ROW8(3)
    STORE_ROW8(4) STORE_ROW8(5) STORE_ROW8(6) STORE_ROW8(7)
}

/* Direct stride-1 weight gradient shaped for CPU devices: gw[oc, tap] = sum over n, oh, ow of
 * gy[n, oc, oh, ow] * xp[n, c, oh + kh, ow + kw], tap = (c*K + kh)*K + kw. One work-item per
 * work-group owns 4 output channels x 4 taps in sixteen float16 accumulators that run along
 * ow (16 lanes), over the whole batch, and reduces the lanes once at the end: no im2col
 * matrix, no layout change of gy. Lanes past OW are zero in gy, so the x lanes they meet
 * (read from the padded input's slack or the next row) add nothing.
 * global = (ceil(CKK/4), ceil(OC/4)). */
#define GW_ACC(r, t) acc##r##t = fma(g##r, x##t, acc##r##t);
#define GW_STORE(r, t)                                                                             \
    if (oc0 + r < OC && q0 + t < CKK) {                                                            \
        float16 v = acc##r##t;                                                                     \
        float8 h8 = v.lo + v.hi;                                                                   \
        float4 h4 = h8.lo + h8.hi;                                                                 \
        float2 h2 = h4.lo + h4.hi;                                                                 \
        gw[gwoff + (oc0 + r) * CKK + q0 + t] = h2.x + h2.y;                                        \
    }

__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void conv_wgrad_s1(
    __global float *gw, int gwoff, __global const float *gy, int gyoff,
    __global const float *xp, int N, int C, int Hp, int Wp, int OC, int K, int OH, int OW) {
    int CKK = C * K * K, q0 = get_global_id(0) * 4, oc0 = get_global_id(1) * 4;
    if (q0 >= CKK || oc0 >= OC) return;
    /* Per tap, the offset of its input window; per channel, of its gy plane (clamped at the
     * edges: those lanes are computed and not stored). Scalars, so they stay in registers. */
    int q, kw, kh, c;
#define TAP_OFF(t)                                                                                 \
    q = min(q0 + t, CKK - 1), kw = q % K, kh = (q / K) % K, c = q / (K * K);                       \
    int xo##t = (c * Hp + kh) * Wp + kw;
    TAP_OFF(0) TAP_OFF(1) TAP_OFF(2) TAP_OFF(3)
#undef TAP_OFF
    int go0 = min(oc0 + 0, OC - 1) * OH * OW, go1 = min(oc0 + 1, OC - 1) * OH * OW;
    int go2 = min(oc0 + 2, OC - 1) * OH * OW, go3 = min(oc0 + 3, OC - 1) * OH * OW;
    float16 acc00 = 0, acc01 = 0, acc02 = 0, acc03 = 0, acc10 = 0, acc11 = 0, acc12 = 0;
    float16 acc13 = 0, acc20 = 0, acc21 = 0, acc22 = 0, acc23 = 0, acc30 = 0, acc31 = 0;
    float16 acc32 = 0, acc33 = 0;
    for (int n = 0; n < N; n++) {
        __global const float *gyn = gy + gyoff + n * OC * OH * OW;
        __global const float *xn = xp + n * C * Hp * Wp;
        __global const float *gp0 = gyn + go0, *gp1 = gyn + go1, *gp2 = gyn + go2;
        __global const float *gp3 = gyn + go3;
        __global const float *xp0 = xn + xo0, *xp1 = xn + xo1, *xp2 = xn + xo2, *xp3 = xn + xo3;
        int oh = 0;
        if (OW == 8) { /* 8-wide maps: two rows per float16, gy rows are contiguous */
            for (; oh + 2 <= OH; oh += 2) {
                int p = oh * OW, xr = oh * Wp;
                float16 g0 = vload16(0, gp0 + p), g1 = vload16(0, gp1 + p);
                float16 g2 = vload16(0, gp2 + p), g3 = vload16(0, gp3 + p);
                float16 x0 = (float16)(vload8(0, xp0 + xr), vload8(0, xp0 + xr + Wp));
                float16 x1 = (float16)(vload8(0, xp1 + xr), vload8(0, xp1 + xr + Wp));
                float16 x2 = (float16)(vload8(0, xp2 + xr), vload8(0, xp2 + xr + Wp));
                float16 x3 = (float16)(vload8(0, xp3 + xr), vload8(0, xp3 + xr + Wp));
                GW_ACC(0, 0) GW_ACC(0, 1) GW_ACC(0, 2) GW_ACC(0, 3)
                GW_ACC(1, 0) GW_ACC(1, 1) GW_ACC(1, 2) GW_ACC(1, 3)
                GW_ACC(2, 0) GW_ACC(2, 1) GW_ACC(2, 2) GW_ACC(2, 3)
                GW_ACC(3, 0) GW_ACC(3, 1) GW_ACC(3, 2) GW_ACC(3, 3)
            }
        }
        for (; oh < OH; oh++) {
            for (int ow0 = 0; ow0 < OW; ow0 += 16) {
                int p = oh * OW + ow0, xr = oh * Wp + ow0;
                float16 g0, g1, g2, g3;
                if (ow0 + 16 <= OW) {
                    g0 = vload16(0, gp0 + p), g1 = vload16(0, gp1 + p);
                    g2 = vload16(0, gp2 + p), g3 = vload16(0, gp3 + p);
                } else { /* a partial row: read only its lanes (gy has no slack), zero the rest */
                    float t0[16], t1[16], t2[16], t3[16];
                    for (int l = 0; l < 16; l++) {
                        int in = ow0 + l < OW;
                        t0[l] = in ? gp0[p + l] : 0.0f, t1[l] = in ? gp1[p + l] : 0.0f;
                        t2[l] = in ? gp2[p + l] : 0.0f, t3[l] = in ? gp3[p + l] : 0.0f;
                    }
                    g0 = vload16(0, t0), g1 = vload16(0, t1);
                    g2 = vload16(0, t2), g3 = vload16(0, t3);
                }
                float16 x0 = vload16(0, xp0 + xr), x1 = vload16(0, xp1 + xr);
                float16 x2 = vload16(0, xp2 + xr), x3 = vload16(0, xp3 + xr);
                GW_ACC(0, 0) GW_ACC(0, 1) GW_ACC(0, 2) GW_ACC(0, 3)
                GW_ACC(1, 0) GW_ACC(1, 1) GW_ACC(1, 2) GW_ACC(1, 3)
                GW_ACC(2, 0) GW_ACC(2, 1) GW_ACC(2, 2) GW_ACC(2, 3)
                GW_ACC(3, 0) GW_ACC(3, 1) GW_ACC(3, 2) GW_ACC(3, 3)
            }
        }
    }
    GW_STORE(0, 0) GW_STORE(0, 1) GW_STORE(0, 2) GW_STORE(0, 3)
    GW_STORE(1, 0) GW_STORE(1, 1) GW_STORE(1, 2) GW_STORE(1, 3)
    GW_STORE(2, 0) GW_STORE(2, 1) GW_STORE(2, 2) GW_STORE(2, 3)
    GW_STORE(3, 0) GW_STORE(3, 1) GW_STORE(3, 2) GW_STORE(3, 3)
}

/* gy (N, OC, OH, OW) to pixel-major rows gyt[(n*OHW + p)*OCp + oc], channels padded with zeros
 * to OCp (a multiple of 32): the operand layout of conv_wgrad_rows. gy's planes are padded by
 * gp on every side ((OH + 2*gp) x (OW + 2*gp): the input gradient's padded copy, handed over
 * by the next layer's backward), or plain with gp = 0. One work-item per pixel (on PoCL this
 * ran faster than 16-pixel blocks or a local-memory tile transpose). */
__kernel void gy_to_rows_pad(__global float *gyt, __global const float *gy, int gp, int N,
                             int OC, int OH, int OW, int OCp) {
    int r = get_global_id(0), OHW = OH * OW;
    if (r >= N * OHW) return;
    int p = r % OHW, n = r / OHW, Wq = OW + 2 * gp, plane = (OH + 2 * gp) * Wq;
    __global const float *src = gy + (long)n * OC * plane + (p / OW + gp) * Wq + p % OW + gp;
    __global float *dst = gyt + (long)r * OCp;
    for (int oc = 0; oc < OC; oc++) dst[oc] = src[(long)oc * plane];
    for (int oc = OC; oc < OCp; oc++) dst[oc] = 0.0f;
}

/* Stride-1 weight gradient as a GEMM over pixels, shaped for CPU devices:
 * gw[oc, tap] = sum over (n, oh, ow) of gyt[pixel, oc] * xp[n, c, oh + kh, ow + kw], with
 * tap = (c*K + kh)*K + kw. One work-item per work-group owns 8 taps x 32 channels in sixteen
 * float16 accumulators (channels in the lanes, so no reduction across lanes): per pixel, two
 * vloads of gy's row and eight broadcast input values into explicit fmas, the input read in
 * place from the padded image (an implicit im2col). The pixels are split into S slices of
 * `nb` images, each work-item summing one slice into its own partial gw at out + s*ostride
 * (reduced afterwards unless S is 1): a slice of gy rows stays in cache while every tap tile
 * of the slice passes over it. Taps past CKK and channels past OC are computed from clamped
 * addresses and zero lanes, and not stored.
 * global = (ceil(CKK/8), OCp/32, S). */
#define WT_TAP(t)                                                                                  \
    q = min(t0 + t, CKK - 1), kw = q % K, kh = (q / K) % K, c = q / (K * K);                       \
    int xo##t = (c * Hp + kh) * Wp + kw;
#define WT_ACC(t)                                                                                  \
    {                                                                                              \
        float16 xv = (float16)(xr[xo##t]);                                                         \
        a##t = fma(xv, g0, a##t);                                                                  \
        b##t = fma(xv, g1, b##t);                                                                  \
    }
#define WT_STORE(t)                                                                                \
    if (t0 + t < CKK) {                                                                            \
        float la[16], lb[16];                                                                      \
        vstore16(a##t, 0, la);                                                                     \
        vstore16(b##t, 0, lb);                                                                     \
        for (int l = 0; l < 16; l++) {                                                             \
            if (oc0 + l < OC) o[(oc0 + l) * CKK + t0 + t] = la[l];                                 \
            if (oc0 + 16 + l < OC) o[(oc0 + 16 + l) * CKK + t0 + t] = lb[l];                       \
        }                                                                                          \
    }

/* The pixel loop of the row GEMM's tiles: every pixel of images n0 <= n < n1, its row of gy at
 * g (channels from oc0) and its input at xr; PIXEL() loads g and accumulates. */
#define WT_PIXELS(PIXEL)                                                                           \
    for (int n = n0; n < n1; n++) {                                                                \
        __global const float *g = gyt + (long)n * OH * OW * OCp + oc0;                            \
        __global const float *xn = xp + (long)n * C * Hp * Wp;                                     \
        for (int oh = 0; oh < OH; oh++) {                                                          \
            __global const float *xr = xn + oh * Wp;                                               \
            for (int ow = 0; ow < OW; ow++, xr++, g += OCp) {                                      \
                PIXEL()                                                                            \
            }                                                                                      \
        }                                                                                          \
    }
#define PIXEL_32()                                                                                 \
    float16 g0 = vload16(0, g), g1 = vload16(0, g + 16);                                           \
    WT_ACC(0) WT_ACC(1) WT_ACC(2) WT_ACC(3) WT_ACC(4) WT_ACC(5) WT_ACC(6) WT_ACC(7)

/* One tile of conv_wgrad_rows: taps t0.. t0+7 x channels oc0.. oc0+31 over images n0 <= n < n1,
 * stored at o (a slice's partial gw). */
static void wgrad_rows_tile(__global float *o, __global const float *gyt, int OCp,
                            __global const float *xp, int n0, int n1, int C, int Hp, int Wp,
                            int OC, int K, int OH, int OW, int t0, int oc0) {
    int CKK = C * K * K, q, kw, kh, c;
    WT_TAP(0) WT_TAP(1) WT_TAP(2) WT_TAP(3) WT_TAP(4) WT_TAP(5) WT_TAP(6) WT_TAP(7)
    float16 a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    float16 b0 = 0, b1 = 0, b2 = 0, b3 = 0, b4 = 0, b5 = 0, b6 = 0, b7 = 0;
    WT_PIXELS(PIXEL_32)
    WT_STORE(0) WT_STORE(1) WT_STORE(2) WT_STORE(3)
    WT_STORE(4) WT_STORE(5) WT_STORE(6) WT_STORE(7)
}

/* The same with 6 taps x 64 channels per work-item (24 accumulators), for OCp a multiple of
 * 64: four vloads of gy's row and six broadcasts per 24 fmas instead of two and eight per 16,
 * and a work-item reads whole rows of gy. On PoCL: seed's third layer's weight gradient 7%
 * faster, resnet's 64- and 128-channel ones 3-5%. global = (ceil(CKK/6), OCp/64, S). */
#define W64_ACC(t)                                                                                 \
    {                                                                                              \
        float16 xv = (float16)(xr[xo##t]);                                                         \
        a##t = fma(xv, g0, a##t);                                                                  \
        b##t = fma(xv, g1, b##t);                                                                  \
        c##t = fma(xv, g2, c##t);                                                                  \
        d##t = fma(xv, g3, d##t);                                                                  \
    }
#define W64_STORE(t)                                                                               \
    if (t0 + t < CKK) {                                                                            \
        float la[64];                                                                              \
        vstore16(a##t, 0, la);                                                                     \
        vstore16(b##t, 1, la);                                                                     \
        vstore16(c##t, 2, la);                                                                     \
        vstore16(d##t, 3, la);                                                                     \
        for (int l = 0; l < 64; l++)                                                               \
            if (oc0 + l < OC) o[(oc0 + l) * CKK + t0 + t] = la[l];                                 \
    }

#define PIXEL_64()                                                                                 \
    float16 g0 = vload16(0, g), g1 = vload16(0, g + 16);                                           \
    float16 g2 = vload16(0, g + 32), g3 = vload16(0, g + 48);                                      \
    W64_ACC(0) W64_ACC(1) W64_ACC(2) W64_ACC(3) W64_ACC(4) W64_ACC(5)

static void wgrad_rows_tile64(__global float *o, __global const float *gyt, int OCp,
                              __global const float *xp, int n0, int n1, int C, int Hp, int Wp,
                              int OC, int K, int OH, int OW, int t0, int oc0) {
    int CKK = C * K * K, q, kw, kh, c;
    WT_TAP(0) WT_TAP(1) WT_TAP(2) WT_TAP(3) WT_TAP(4) WT_TAP(5)
    float16 a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0;
    float16 b0 = 0, b1 = 0, b2 = 0, b3 = 0, b4 = 0, b5 = 0;
    float16 c0 = 0, c1 = 0, c2 = 0, c3 = 0, c4 = 0, c5 = 0;
    float16 d0 = 0, d1 = 0, d2 = 0, d3 = 0, d4 = 0, d5 = 0;
    WT_PIXELS(PIXEL_64)
    W64_STORE(0) W64_STORE(1) W64_STORE(2) W64_STORE(3) W64_STORE(4) W64_STORE(5)
}

/* The kernels of both tiles: TAPS taps x CH channels per work-item.
 * global = (ceil(CKK/TAPS), OCp/CH, S). */
#define WGRAD_ROWS_KERNEL(NAME, TILE, TAPS, CH)                                                    \
    __kernel __attribute__((reqd_work_group_size(1, 1, 1))) void NAME(                             \
        __global float *out, int outoff, int ostride, __global const float *gyt, int OCp,         \
        __global const float *xp, int N, int nb, int C, int Hp, int Wp, int OC, int K, int OH,     \
        int OW) {                                                                                  \
        int CKK = C * K * K, t0 = get_global_id(0) * TAPS, oc0 = get_global_id(1) * CH;           \
        int s = get_global_id(2), n0 = s * nb, n1 = min(N, n0 + nb);                               \
        if (t0 >= CKK || oc0 >= OCp) return;                                                       \
        TILE(out + outoff + s * ostride, gyt, OCp, xp, n0, n1, C, Hp, Wp, OC, K, OH, OW, t0, oc0); \
    }
WGRAD_ROWS_KERNEL(conv_wgrad_rows, wgrad_rows_tile, 8, 32)
WGRAD_ROWS_KERNEL(conv_wgrad_rows64, wgrad_rows_tile64, 6, 64)

/* The backward of a convolution whose output went through a fused MaxPool2d(2), from the
 * pooled gradient gp (N, OC, PH, PW) and the pool's argmax: the gradient at the convolution's
 * output, written as pixel rows gyt[(n*OHW + p)*OCp + oc] for conv_wgrad_rows (channels past
 * OC are zeros). It is gp at each window's argmax and zero elsewhere, including an odd last
 * row or column that no window covers. One work-item per pair of output rows and 16 channels:
 * per window, sixteen channels' values and argmaxes, then each of its four pixels' 16 channels
 * as one vector store. global = N * ceil(OH/2) * OCp/16. */
/* One block of pool2_grad_to_rows: image n, output rows 2*bh and 2*bh + 1, channels oc0.. +15,
 * written from dst (the pixel row of (n, 2*bh, 0)). */
static void pool2_rows_block(__global float *dst, __global const float *gp, int gpoff,
                             __global const int *argmax, int OC, int OCp, int OH, int OW, int n,
                             int bh, int oc0) {
    int PH = OH / 2, PW = OW / 2, BW = (OW + 1) / 2;
    int oh = 2 * bh, down = oh + 1 < OH, PHW = PH * PW;
    /* per lane: its channel's pooled plane (clamped past OC: those lanes are zeroed) */
    __global const float *gpl = gp + gpoff + (long)n * OC * PHW + bh * PW;
    __global const int *aml = argmax + (long)n * OC * PHW + bh * PW;
    int16 lane = (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    int16 live = oc0 + lane < OC;
    float16 z = (float16)(0.0f);
    for (int bw = 0; bw < BW; bw++) {
        int ow = 2 * bw, right = ow + 1 < OW, p00 = oh * OW + ow;
        int win = bh < PH && bw < PW, w = min(bw, PW - 1);
        /* built as vector literals: through a private array (a store per lane and a vector
         * load, which stalls), this took a fifth more of conv_wgrad_pool_chunks' time on PoCL */
#define Q(l) ((long)min(oc0 + l, OC - 1) * PHW + w)
#define LANES(p)                                                                                   \
    p[Q(0)], p[Q(1)], p[Q(2)], p[Q(3)], p[Q(4)], p[Q(5)], p[Q(6)], p[Q(7)], p[Q(8)], p[Q(9)],      \
        p[Q(10)], p[Q(11)], p[Q(12)], p[Q(13)], p[Q(14)], p[Q(15)]
        float16 v = win ? select(z, (float16)(LANES(gpl)), live) : z;
        int16 b = win ? (int16)(LANES(aml)) - p00 : (int16)(-1);
#undef LANES
#undef Q
        __global float *r00 = dst + (long)ow * OCp + oc0;
        vstore16(select(z, v, b == 0), 0, r00);
        if (right) vstore16(select(z, v, b == 1), 0, r00 + OCp);
        if (down) vstore16(select(z, v, b == OW), 0, r00 + (long)OW * OCp);
        if (right && down) vstore16(select(z, v, b == OW + 1), 0, r00 + (long)(OW + 1) * OCp);
    }
}

__kernel void pool2_grad_to_rows(__global float *gyt, __global const float *gp, int gpoff,
                                 __global const int *argmax, int N, int OC, int OCp, int OH,
                                 int OW) {
    int BH = (OH + 1) / 2, chunks = OCp / 16, r = get_global_id(0);
    if (r >= N * BH * chunks) return;
    int n = r / (chunks * BH), bh = (r / chunks) % BH;
    pool2_rows_block(gyt + ((long)n * OH * OW + 2 * bh * OW) * OCp, gp, gpoff, argmax, OC, OCp,
                     OH, OW, n, bh, (r % chunks) * 16);
}

/* The most taps conv_wgrad_pool_chunks holds accumulators for (its private array). */
#define CHUNK_TAPS 128

/* The same for a layer with few taps and 32 padded channels (seed's first: 75 taps, 32x32
 * maps), where the rows are many and the taps few: per pair of output rows of one image, its
 * pixel rows (8 KB at 32 wide) go to the same 8 KB of gyt (the slice's first rows) and every
 * tap tile runs over them at once, while they are in L1, its accumulators kept between pairs
 * in a private array of all taps; the rows are never read back from L2 or memory, and their
 * stores hit L1 (rows of their own per pair took a third longer on PoCL, writing 128 KB per
 * image to memory). conv_wgrad_pool_rows instead runs each tap tile over the whole slice.
 * global = S; needs OCp == 32 and CKK <= CHUNK_TAPS. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void conv_wgrad_pool_chunks(
    __global float *out, int outoff, int ostride, __global float *gyt,
    __global const float *gp, int gpoff, __global const int *argmax, __global const float *xp,
    int N, int nb, int C, int Hp, int Wp, int OC, int K, int OH, int OW) {
    int s = get_global_id(0), n0 = s * nb, n1 = min(N, n0 + nb), CKK = C * K * K;
    int tiles = (CKK + 7) / 8;
    float16 acc[2 * CHUNK_TAPS];
    int xoff[CHUNK_TAPS];
    for (int q = 0; q < 8 * tiles; q++) {
        int t = min(q, CKK - 1), kw = t % K, kh = (t / K) % K, c = t / (K * K);
        xoff[q] = (c * Hp + kh) * Wp + kw;
        acc[2 * q] = 0.0f, acc[2 * q + 1] = 0.0f;
    }
    /* each row pair's rows in the same place, the slice's first: they stay in L1 */
    __global float *gr = gyt + (long)n0 * OH * OW * 32;
    for (int n = n0; n < n1; n++)
        for (int bh = 0; bh < (OH + 1) / 2; bh++) {
            pool2_rows_block(gr, gp, gpoff, argmax, OC, 32, OH, OW, n, bh, 0);
            pool2_rows_block(gr, gp, gpoff, argmax, OC, 32, OH, OW, n, bh, 16);
            int oh0 = 2 * bh, rows = min(2, OH - oh0);
            __global const float *xb = xp + (long)n * C * Hp * Wp + oh0 * Wp;
            for (int t0 = 0; t0 < 8 * tiles; t0 += 8) {
                int xo0 = xoff[t0], xo1 = xoff[t0 + 1], xo2 = xoff[t0 + 2], xo3 = xoff[t0 + 3];
                int xo4 = xoff[t0 + 4], xo5 = xoff[t0 + 5], xo6 = xoff[t0 + 6];
                int xo7 = xoff[t0 + 7];
                __private float16 *A = acc + 2 * t0;
                float16 a0 = A[0], a1 = A[2], a2 = A[4], a3 = A[6], a4 = A[8], a5 = A[10];
                float16 a6 = A[12], a7 = A[14], b0 = A[1], b1 = A[3], b2 = A[5], b3 = A[7];
                float16 b4 = A[9], b5 = A[11], b6 = A[13], b7 = A[15];
                __global const float *g = gr;
                for (int r = 0; r < rows; r++) {
                    __global const float *xr = xb + r * Wp;
                    for (int ow = 0; ow < OW; ow++, xr++, g += 32) {
                        float16 g0 = vload16(0, g), g1 = vload16(0, g + 16);
                        WT_ACC(0) WT_ACC(1) WT_ACC(2) WT_ACC(3)
                        WT_ACC(4) WT_ACC(5) WT_ACC(6) WT_ACC(7)
                    }
                }
                A[0] = a0, A[2] = a1, A[4] = a2, A[6] = a3, A[8] = a4, A[10] = a5, A[12] = a6;
                A[14] = a7, A[1] = b0, A[3] = b1, A[5] = b2, A[7] = b3, A[9] = b4, A[11] = b5;
                A[13] = b6, A[15] = b7;
            }
        }
    __global float *o = out + outoff + s * ostride;
    for (int q = 0; q < CKK; q++) {
        float la[32];
        vstore16(acc[2 * q], 0, la);
        vstore16(acc[2 * q + 1], 1, la);
        for (int l = 0; l < OC; l++) o[l * CKK + q] = la[l];
    }
}

/* Both at once for one slice of nb images, by one work-item per work-group: the slice's pixel
 * rows (pool2_grad_to_rows), then every tile of conv_wgrad_rows (or _rows64) over them into
 * the slice's partial gw at out + s*ostride, so the rows are read back from this core's cache
 * rather than from memory: the separate passes write them all to memory and read them back.
 * global = S. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void conv_wgrad_pool_rows(
    __global float *out, int outoff, int ostride, __global float *gyt, int OCp,
    __global const float *gp, int gpoff, __global const int *argmax, __global const float *xp,
    int N, int nb, int C, int Hp, int Wp, int OC, int K, int OH, int OW) {
    int s = get_global_id(0), n0 = s * nb, n1 = min(N, n0 + nb), CKK = C * K * K;
    for (int n = n0; n < n1; n++)
        for (int bh = 0; bh < (OH + 1) / 2; bh++)
            for (int oc0 = 0; oc0 < OCp; oc0 += 16)
                pool2_rows_block(gyt + ((long)n * OH * OW + 2 * bh * OW) * OCp, gp, gpoff, argmax,
                                 OC, OCp, OH, OW, n, bh, oc0);
    if (OCp % 64 == 0)
        for (int t0 = 0; t0 < CKK; t0 += 6)
            for (int oc0 = 0; oc0 < OCp; oc0 += 64)
                wgrad_rows_tile64(out + outoff + s * ostride, gyt, OCp, xp, n0, n1, C, Hp, Wp, OC,
                                  K, OH, OW, t0, oc0);
    else
        for (int t0 = 0; t0 < CKK; t0 += 8)
            for (int oc0 = 0; oc0 < OCp; oc0 += 32)
                wgrad_rows_tile(out + outoff + s * ostride, gyt, OCp, xp, n0, n1, C, Hp, Wp, OC,
                                K, OH, OW, t0, oc0);
}

/* The same gradient in NCHW, zero-padded by `pad` as pad_input leaves a tensor (gy: N, OC,
 * OH + 2*pad, OW + 2*pad, then `slack` zeros), for the input-gradient convolution: one
 * work-item per work-group writes `per` whole (n, oc) planes, eight windows at a time from
 * contiguous rows of gp and argmax, each pair of output rows as two interleaved vectors. On
 * PoCL this took under half the time of per-channel scalar stores beside the rows above.
 * global = ceil(N*OC/per). */
static void grad_plane(__global float *gy, int pad, int slack, __global const float *gp, int gpoff,
                       __global const int *argmax, int NOC, int OH, int OW, int plane) {
    int PH = OH / 2, PW = OW / 2, Hp = OH + 2 * pad, Wp = OW + 2 * pad;
    __global float *dst = gy + (long)plane * Hp * Wp;
    __global const float *g = gp + gpoff + (long)plane * PH * PW;
    __global const int *am = argmax + (long)plane * PH * PW;
    if (plane == NOC - 1)
        for (int i = 0; i < slack; i++) dst[Hp * Wp + i] = 0.0f;
    for (int i = 0; i < pad * Wp + pad; i++) dst[i] = 0.0f; /* above the first row's data */
    uint16 even = (uint16)(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
    float8 z = (float8)(0.0f);
    for (int oh = 0; oh < OH; oh += 2) {
        __global float *d0 = dst + (pad + oh) * Wp + pad, *d1 = d0 + Wp;
        int two = oh + 1 < OH, ph = oh / 2, pw = 0;
        if (ph < PH) {
            for (; pw + 8 <= PW; pw += 8) {
                float8 v = vload8(0, g + ph * PW + pw);
                int8 b = vload8(0, am + ph * PW + pw) -
                         (oh * OW + 2 * pw + 2 * (int8)(0, 1, 2, 3, 4, 5, 6, 7));
                vstore16(shuffle2(select(z, v, b == 0), select(z, v, b == 1), even), 0,
                         d0 + 2 * pw);
                vstore16(shuffle2(select(z, v, b == OW), select(z, v, b == OW + 1), even), 0,
                         d1 + 2 * pw);
            }
            for (; pw < PW; pw++) {
                float v = g[ph * PW + pw];
                int b = am[ph * PW + pw] - (oh * OW + 2 * pw);
                d0[2 * pw] = b == 0 ? v : 0.0f, d0[2 * pw + 1] = b == 1 ? v : 0.0f;
                d1[2 * pw] = b == OW ? v : 0.0f, d1[2 * pw + 1] = b == OW + 1 ? v : 0.0f;
            }
        } else /* an odd last row: no window */
            for (int w = 0; w < 2 * PW; w++) d0[w] = 0.0f;
        /* an odd last column, then the right pad and the next row's left pad */
        for (int w = 2 * PW; w < OW + 2 * pad; w++) d0[w] = 0.0f;
        if (two)
            for (int w = 2 * PW; w < OW + 2 * pad; w++) d1[w] = 0.0f;
    }
    /* the rows below the data (the last row's right pad is done) */
    __global float *b = dst + (pad + OH) * Wp + pad;
    for (int i = 0; i < pad * Wp - pad; i++) b[i] = 0.0f;
}

__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void pool2_grad_nchw(
    __global float *gy, int pad, int slack, __global const float *gp, int gpoff,
    __global const int *argmax, int NOC, int OH, int OW, int per) {
    for (int plane = get_global_id(0) * per, end = min(NOC, plane + per); plane < end; plane++)
        grad_plane(gy, pad, slack, gp, gpoff, argmax, NOC, OH, OW, plane);
}

/* The weights of a convolution with O outputs, I inputs and T = K*K taps in the layout of
 * conv_bcast_s1: wt[(i*T + t)*Op + o], Op = O rounded up to 16, zeros past O. With flip, the
 * convolution is the input gradient of w (I, O, K, K): its weight (o, i, t) is w's (i, o, T-1-t).
 * One work-item per (i, t) row of Op values. */
__kernel void weights_to_lanes(__global float *wt, __global const float *w, int woff, int O,
                               int I, int T, int Op, int flip) {
    int r = get_global_id(0);
    if (r >= I * T) return;
    int i = r / T, t = r % T;
    __global float *dst = wt + (long)r * Op;
    for (int o = 0; o < Op; o++) {
        long src = flip ? ((long)i * O + o) * T + (T - 1 - t) : ((long)o * I + i) * T + t;
        dst[o] = o < O ? w[woff + src] : 0.0f;
    }
}

/* The taps of the lanes kernels: per input channel and kernel row, KC kernel columns of V
 * weight vectors and V*R*Q fmas. With U3 (CONV_BCAST's last argument) a 3x3 kernel takes a
 * copy with KC = 3 whose column loop unrolls, as DIRECT_TAPS: on PoCL that ran the 18-
 * accumulator 3x3 variant 13% faster, and the 28-accumulator ones 1.7x slower (spills). */
#define BCAST_TAPS(V, R, Q, KC, UNROLL)                                                            \
    for (int c = 0; c < C; c++) {                                                                  \
        for (int kh = 0; kh < KC; kh++) {                                                          \
            __global const float *x0 = xn + ((long)c * Hp + kh) * Wp;                              \
            UNROLL for (int kw = 0; kw < KC; kw++, x0++, wc += Op) {                               \
                float16 wv[V];                                                                     \
                _Pragma("unroll") for (int v = 0; v < V; v++) wv[v] = vload16(v, wc);              \
                _Pragma("unroll") for (int r = 0; r < R; r++)                                      \
                    _Pragma("unroll") for (int q = 0; q < Q; q++)                                  \
                        _Pragma("unroll") for (int v = 0; v < V; v++)                              \
                            acc[v][r][q] = fma((float16)(x0[r * Wp + q]), wv[v], acc[v][r][q]);    \
            }                                                                                      \
        }                                                                                          \
    }

/* Direct stride-1 convolution with the output channels in the vector lanes, shaped for CPU
 * devices: one work-item per work-group owns V*16 output channels x R rows x Q columns in
 * V*R*Q float16 accumulators (arrays over constant, fully unrolled loops, so they live in
 * registers); per tap, V vector loads of 16 weights (wt, from weights_to_lanes) and V*R*Q fmas,
 * each broadcasting one input value straight from memory (x86's embedded broadcast): about
 * one instruction per fma, where conv_direct_s1 needs two loads and eight broadcasts per
 * sixteen. The tile goes to NCHW through a private copy. Columns and rows past the output are
 * computed from the padded input's slack and not stored; channels past OC have zero weights
 * and are not stored. global = (ceil(OW/Q) * ceil(OH/R), Op/(16*V), N). Variants: */
#define CONV_BCAST(NAME, V, R, Q, U3)                                                              \
    __kernel __attribute__((reqd_work_group_size(1, 1, 1))) void NAME(                             \
        __global float *y, __global const float *xp, __global const float *wt, int Op,             \
        __global const float *p, int boff, int has_bias, int C, int Hp, int Wp, int OC, int K,     \
        int OH, int OW) {                                                                          \
        int tiles_w = (OW + Q - 1) / Q;                                                            \
        int t = get_global_id(0), oc0 = get_global_id(1) * 16 * V, n = get_global_id(2);           \
        int ow0 = (t % tiles_w) * Q, oh0 = (t / tiles_w) * R;                                      \
        if (oh0 >= OH) return;                                                                     \
        float16 acc[V][R][Q];                                                                      \
        _Pragma("unroll") for (int v = 0; v < V; v++)                                              \
            _Pragma("unroll") for (int r = 0; r < R; r++)                                          \
                _Pragma("unroll") for (int q = 0; q < Q; q++) acc[v][r][q] = 0.0f;                 \
        __global const float *xn = xp + ((long)n * C * Hp + oh0) * Wp + ow0;                       \
        __global const float *wc = wt + oc0;                                                       \
        if (U3 && K == 3)                                                                          \
            BCAST_TAPS(V, R, Q, 3, _Pragma("unroll"))                                              \
        else                                                                                       \
            BCAST_TAPS(V, R, Q, K, )                                                               \
        float tile[V * R * Q * 16];                                                                \
        _Pragma("unroll") for (int v = 0; v < V; v++)                                              \
            _Pragma("unroll") for (int r = 0; r < R; r++)                                          \
                _Pragma("unroll") for (int q = 0; q < Q; q++)                                      \
                    vstore16(acc[v][r][q], (v * R + r) * Q + q, tile);                             \
        int rows = min(R, OH - oh0), cols = min(Q, OW - ow0), lanes = min(16 * V, OC - oc0);       \
        __global float *y0 = y + (((long)n * OC + oc0) * OH + oh0) * OW + ow0;                     \
        for (int l = 0; l < lanes; l++) {                                                          \
            float bias = has_bias ? p[boff + oc0 + l] : 0.0f;                                      \
            __global float *yp = y0 + (long)l * OH * OW;                                           \
            __private const float *tl = tile + (l / 16) * R * Q * 16 + l % 16;                     \
            for (int r = 0; r < rows; r++)                                                         \
                for (int q = 0; q < cols; q++) yp[r * OW + q] = tl[(r * Q + q) * 16] + bias;       \
        }                                                                                          \
    }

/* 16 channels x 1 row x 28 columns, x 2 x 14 and x 4 x 7: each a run of 28 contiguous outputs
 * per channel on maps of that width, and the last any map 7, 14, 21, 28 ... wide; 32 channels
 * x 3 x 3: 3x3 maps (as resnet's last blocks) */
CONV_BCAST(conv_bcast_s1_w28, 1, 1, 28, 0)
CONV_BCAST(conv_bcast_s1_w14, 1, 2, 14, 0)
CONV_BCAST(conv_bcast_s1, 1, 4, 7, 0)
CONV_BCAST(conv_bcast_s1_3x3, 2, 3, 3, 1)

/* Implicit-GEMM convolution shaped for GPUs: y[n, oc, q] = b[oc] + sum over k = (c, kh, kw) of
 * w[oc, k] * x[n, c, oh*stride - pad + kh, ow*stride - pad + kw] (0 outside the image), as the
 * GEMM of the weights (OC x CKK) and the im2col matrix (CKK x N*OHW) without building it: each
 * GX x GY work-group computes TC = GY*RY output channels x TP = GX*RX output pixels of the
 * batch, each work-item an RY x RX block in registers (channels i0 + GY*r, pixels j0 + GX*c, so
 * neighbouring work-items touch neighbouring pixels); K goes in steps of 16, the group staging
 * TC x 16 weights (float4 loads along k, four consecutive taps of one channel per load) and a
 * 16 x TP panel gathered straight from the image in local memory, as gemm_tiled does. Any
 * stride and padding; every load and store is guarded. Indices into x and y are long (tensors
 * past 2^31 elements). The sizes (src/layers/conv2d/implicit.c, `implicit_sizes`, and the table of
 * defaults per device class there): conv_implicit (16 x 16 of 4 x 4: 64 x 64),
 * conv_implicit_32 (8 x 8 of 4 x 4: 32 x 32), conv_implicit_128 (16 x 16 of 4 x 8: 64 channels
 * x 128 pixels), conv_implicit_w8 (8 x 8 of 8 x 8: 64 x 64 from a quarter of the work-items).
 * As and Bs: the panels, 16 x (TC + 1) and 16 x (TP + 1) floats of local memory, sized by the
 * host (local arguments rather than arrays in the kernel: every implementation, oclgrind's
 * too, then counts exactly what each launch takes).
 * global = (ceil(N*OHW/TP)*GX, ceil(OC/TC)*GY), local = (GX, GY). */
#define IG_K 16
/* The sizes, X(kernel name suffix, GX, GY, RX, RY), in src/layers/conv2d/implicit.c's order. */
#define IG_SIZES(X) X(, 16, 16, 4, 4) X(_32, 8, 8, 4, 4) X(_128, 16, 16, 8, 4) X(_w8, 8, 8, 8, 8)
/* The largest register block a size takes (the accumulators are declared this big; the loops
 * over RY and RX are unrolled with constant bounds, so only RY x RX of them live). The bodies
 * are inlined into each size's kernel, so that those bounds are constants when the loops are
 * unrolled (a body shared by four kernels and left out of line keeps its accumulators in
 * memory). */
#define IG_R 8
#define IG_INLINE inline __attribute__((always_inline))

/* Once both panels (row strides SA = TC + 1, SB = TP + 1) are staged: 16 rank-1 updates of the
 * work-item's RY x RX block from local memory, between the barriers that guard the panels. */
static IG_INLINE void ig_update(float acc[IG_R][IG_R], __local const float *As, __local const float *Bs,
                      int tx, int ty, const int GX, const int GY, const int RX, const int RY) {
    const int SA = GY * RY + 1, SB = GX * RX + 1;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int kk = 0; kk < IG_K; kk++) {
        __local const float *a = As + kk * SA + ty, *b = Bs + kk * SB + tx;
#pragma unroll
        for (int r = 0; r < RY; r++)
#pragma unroll
            for (int c = 0; c < RX; c++) acc[r][c] = fma(a[GY * r], b[GX * c], acc[r][c]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}

/* Stages row ii's four values v of k0 + 4*k4 .. + 3 into panel As (row stride SA): element
 * (k, i) at As[k*SA + i]. */
static IG_INLINE void ig_stage4(__local float *As, int SA, int k4, int ii, float4 v) {
    As[(4 * k4 + 0) * SA + ii] = v.s0;
    As[(4 * k4 + 1) * SA + ii] = v.s1;
    As[(4 * k4 + 2) * SA + ii] = v.s2;
    As[(4 * k4 + 3) * SA + ii] = v.s3;
}

/* The body of every size of the forward; GX, GY, RX, RY constants at each call. */
static IG_INLINE void implicit_forward(__global float *y, __global const float *x,
                             __global const float *p, int woff, int boff, int has_bias, int N,
                             int C, int H, int W, int OC, int K, int stride, int pad, int OH,
                             int OW, const int GX, const int GY, const int RX, const int RY,
                             __local float *As, __local float *Bs) {
    const int TC = GY * RY, TP = GX * RX, SA = TC + 1, SB = TP + 1, G2 = GX * GY;
    const int LA = TC * IG_K / 4 / G2, LB = TP * IG_K / G2;
    int tx = get_local_id(0), ty = get_local_id(1), t = ty * GX + tx;
    int bi = get_group_id(1) * TC, bj = get_group_id(0) * TP;
    int KK = K * K, CKK = C * KK, OHW = OH * OW, NP = N * OHW;
    float acc[IG_R][IG_R] = {{0.0f}};
    for (int k0 = 0; k0 < CKK; k0 += IG_K) {
        for (int l = 0; l < LA; l++) {
            int f = t + G2 * l, k4 = f % (IG_K / 4), ii = f / (IG_K / 4), gi = bi + ii;
            int gk = k0 + 4 * k4;
            float4 v = (float4)(0.0f);
            if (gi < OC) {
                __global const float *w = p + woff + (long)gi * CKK + gk;
                if (gk + 3 < CKK)
                    v = vload4(0, w);
                else
                    v = (float4)(gk < CKK ? w[0] : 0.0f, gk + 1 < CKK ? w[1] : 0.0f,
                                 gk + 2 < CKK ? w[2] : 0.0f, 0.0f);
            }
            ig_stage4(As, SA, k4, ii, v);
        }
        for (int l = 0; l < LB; l++) {
            int e = t + G2 * l, jj = e % TP, kb = e / TP, gj = bj + jj, gkb = k0 + kb;
            float v = 0.0f;
            if (gkb < CKK && gj < NP) {
                int c = gkb / KK, r = gkb % KK, n = gj / OHW, q = gj % OHW;
                int ih = (q / OW) * stride - pad + r / K, iw = (q % OW) * stride - pad + r % K;
                if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                    v = x[(((long)n * C + c) * H + ih) * W + iw];
            }
            Bs[kb * SB + jj] = v;
        }
        ig_update(acc, As, Bs, tx, ty, GX, GY, RX, RY);
    }
#pragma unroll
    for (int r = 0; r < RY; r++) {
        int i = bi + ty + GY * r;
        float bias = has_bias && i < OC ? p[boff + i] : 0.0f;
#pragma unroll
        for (int c = 0; c < RX; c++) {
            int j = bj + tx + GX * c, n = j / OHW, q = j % OHW;
            if (i < OC && j < NP) y[((long)n * OC + i) * OHW + q] = acc[r][c] + bias;
        }
    }
}

#define IG_FORWARD(SUFFIX, GX, GY, RX, RY)                                                         \
    __kernel __attribute__((reqd_work_group_size(GX, GY, 1))) void conv_implicit##SUFFIX(          \
        __global float *y, __global const float *x, __global const float *p, int woff, int boff,   \
        int has_bias, int N, int C, int H, int W, int OC, int K, int stride, int pad, int OH,      \
        int OW, __local float *As, __local float *Bs) {                                            \
        implicit_forward(y, x, p, woff, boff, has_bias, N, C, H, W, OC, K, stride, pad, OH, OW,    \
                         GX, GY, RX, RY, As, Bs);                                                  \
    }
IG_SIZES(IG_FORWARD)

/* The weight gradient as an implicit GEMM shaped for GPUs: gw[oc, k] = sum over the batch's
 * pixels j = (n, q) of gy[n, oc, q] * x[n, c, oh*stride - pad + kh, ow*stride - pad + kw],
 * k = (c, kh, kw), the im2col matrix again gathered from the image, never built. Each GX x GY
 * work-group computes TC = GY*RY output channels x TP = GX*RX taps over one slice of `per`
 * pixels (split-K: a batch has far more pixels than a GPU has work-groups to spare), staging
 * TC x 16 of gy (float4 loads along the pixels where four lie in one image) and 16 x TP of the
 * gathered input in local memory per step, each work-item RY x RX in registers; slice s writes
 * its partial sums to out + s*ostride (reduced afterwards unless there is one slice). The same
 * sizes as the forward (conv_wgrad_implicit, _32, _128, _w8).
 * As and Bs as the forward's.
 * global = (ceil(CKK/TP)*GX, ceil(OC/TC)*GY, S), local = (GX, GY, 1). */
static IG_INLINE void implicit_wgrad(__global float *out, int outoff, int ostride, __global const float *gy,
                           __global const float *x, int N, int C, int H, int W, int OC, int K,
                           int stride, int pad, int OH, int OW, int per, const int GX,
                           const int GY, const int RX, const int RY, __local float *As,
                           __local float *Bs) {
    const int TC = GY * RY, TP = GX * RX, SA = TC + 1, SB = TP + 1, G2 = GX * GY;
    const int LA = TC * IG_K / 4 / G2, LB = TP * IG_K / G2;
    int tx = get_local_id(0), ty = get_local_id(1), t = ty * GX + tx;
    int bi = get_group_id(1) * TC, bk = get_group_id(0) * TP, s = get_group_id(2);
    int KK = K * K, CKK = C * KK, OHW = OH * OW;
    long NP = (long)N * OHW, j0 = (long)s * per, j1 = min(NP, j0 + per);
    float acc[IG_R][IG_R] = {{0.0f}};
    for (long jb = j0; jb < j1; jb += IG_K) {
        for (int l = 0; l < LA; l++) {
            int f = t + G2 * l, k4 = f % (IG_K / 4), ii = f / (IG_K / 4), gi = bi + ii;
            long j = jb + 4 * k4;
            int n = (int)(j / OHW), q = (int)(j % OHW);
            float4 v = (float4)(0.0f);
            if (gi < OC && j < j1) {
                __global const float *g = gy + ((long)n * OC + gi) * OHW + q;
                if (j + 3 < j1 && q + 3 < OHW) {
                    v = vload4(0, g);
                } else {
                    float e[4];
                    for (int u = 0; u < 4; u++) {
                        long ju = j + u;
                        int nu = (int)(ju / OHW), qu = (int)(ju % OHW);
                        e[u] = ju < j1 ? gy[((long)nu * OC + gi) * OHW + qu] : 0.0f;
                    }
                    v = (float4)(e[0], e[1], e[2], e[3]);
                }
            }
            ig_stage4(As, SA, k4, ii, v);
        }
        for (int l = 0; l < LB; l++) {
            int e = t + G2 * l, kk = e % TP, jb2 = e / TP, gk = bk + kk;
            long j2 = jb + jb2;
            float v = 0.0f;
            if (gk < CKK && j2 < j1) {
                int n2 = (int)(j2 / OHW), q2 = (int)(j2 % OHW), c = gk / KK, r = gk % KK;
                int ih = (q2 / OW) * stride - pad + r / K, iw = (q2 % OW) * stride - pad + r % K;
                if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                    v = x[(((long)n2 * C + c) * H + ih) * W + iw];
            }
            Bs[jb2 * SB + kk] = v;
        }
        ig_update(acc, As, Bs, tx, ty, GX, GY, RX, RY);
    }
    __global float *o = out + outoff + (long)s * ostride;
#pragma unroll
    for (int r = 0; r < RY; r++) {
        int i = bi + ty + GY * r;
#pragma unroll
        for (int c = 0; c < RX; c++) {
            int k = bk + tx + GX * c;
            if (i < OC && k < CKK) o[(long)i * CKK + k] = acc[r][c];
        }
    }
}

#define IG_WGRAD(SUFFIX, GX, GY, RX, RY)                                                           \
    __kernel __attribute__((reqd_work_group_size(GX, GY, 1))) void conv_wgrad_implicit##SUFFIX(    \
        __global float *out, int outoff, int ostride, __global const float *gy,                    \
        __global const float *x, int N, int C, int H, int W, int OC, int K, int stride, int pad,   \
        int OH, int OW, int per, __local float *As, __local float *Bs) {                           \
        implicit_wgrad(out, outoff, ostride, gy, x, N, C, H, W, OC, K, stride, pad, OH, OW, per,   \
                       GX, GY, RX, RY, As, Bs);                                                    \
    }
IG_SIZES(IG_WGRAD)

/* Winograd F(2x2, 5x5) convolution for CPU devices (stride 1, 5x5 kernels): each 2x2 output
 * tile is A^T [(G g G^T) . (B^T d B)] A over its 6x6 input patch d, 36 products per tile and
 * channel pair where the direct convolution makes 100. The matrices (points 0, 1, -1, 2, -2 and
 * infinity; derived and checked exactly by tests/ref/winograd_f2x5.py):
 *   B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0;
 *          0 4 0 -5 0 1]
 *   G   = [1/4 0 0 0 0; -1/6 -1/6 -1/6 -1/6 -1/6; -1/6 1/6 -1/6 1/6 -1/6;
 *          1/24 1/12 1/6 1/3 2/3; 1/24 -1/12 1/6 -1/3 2/3; 0 0 0 0 1]
 *   A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 1]
 * The weights' half, U = G g G^T, is wino5_weights' (once per pass, the weights change every
 * step); the rest is conv_wino5's. */

/* U[(p*C + c)*OCp + oc] = (G g G^T)[p] for g = w's (oc, c) filter, p = 6*i + j, zeros for oc
 * past OC (OCp: OC rounded up to 16). With flip, the convolution is the input gradient of w
 * (C, OC, 5, 5): its filter (oc, c) is w's (c, oc) turned by 180 degrees. One work-item per
 * input channel and 16 output channels, one in each lane. global = (C, OCp/16). */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void wino5_weights(
    __global float *U, __global const float *w, int woff, int OC, int C, int OCp, int flip) {
    int c = get_global_id(0), oc0 = get_global_id(1) * 16;
    float16 g[25], t[30];
    for (int k = 0; k < 25; k++) {
        float v[16];
        for (int l = 0; l < 16; l++) {
            int oc = min(oc0 + l, OC - 1);
            v[l] = flip ? w[woff + ((long)c * OC + oc) * 25 + 24 - k]
                        : w[woff + ((long)oc * C + c) * 25 + k];
        }
        g[k] = vload16(0, v);
    }
    int16 live = (int16)(oc0) + (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15) <
                 (int16)(OC);
    /* pass 0: t = G g, a column of g at a time; pass 1: U = t G^T, a row of t at a time */
    for (int pass = 0; pass < 2; pass++)
        for (int r = 0; r < (pass ? 6 : 5); r++) {
            float16 g0, g1, g2, g3, g4;
            if (pass)
                g0 = t[r * 5], g1 = t[r * 5 + 1], g2 = t[r * 5 + 2], g3 = t[r * 5 + 3],
                g4 = t[r * 5 + 4];
            else
                g0 = g[r], g1 = g[5 + r], g2 = g[10 + r], g3 = g[15 + r], g4 = g[20 + r];
            float16 e = g0 + g2 + g4, o = g1 + g3;
            float16 pe = g0 * (1.0f / 24) + g2 * (1.0f / 6) + g4 * (2.0f / 3);
            float16 po = g1 * (1.0f / 12) + g3 * (1.0f / 3);
            float16 res[6] = {g0 * 0.25f, -(e + o) * (1.0f / 6), -(e - o) * (1.0f / 6),
                              pe + po,     pe - po,              g4};
            for (int i = 0; i < 6; i++) {
                if (pass)
                    vstore16(select((float16)(0.0f), res[i], live), 0,
                             U + ((long)(r * 6 + i) * C + c) * OCp + oc0);
                else
                    t[i * 5 + r] = res[i];
            }
        }
}

/* B^T over six vectors d0..d5 (rows or columns of a patch) into o0..o5. */
#define WINO_BT(d0, d1, d2, d3, d4, d5, o0, o1, o2, o3, o4, o5)                                    \
    {                                                                                              \
        float16 t1_ = fma(-4.0f, d2, d4), t2_ = fma(-4.0f, d1, d3);                                \
        float16 t3_ = d4 - d2, t4_ = 2.0f * (d3 - d1);                                             \
        o0 = fma(4.0f, d0, fma(-5.0f, d2, d4));                                                    \
        o1 = t1_ + t2_;                                                                            \
        o2 = t1_ - t2_;                                                                            \
        o3 = t3_ + t4_;                                                                            \
        o4 = t3_ - t4_;                                                                            \
        o5 = fma(4.0f, d1, fma(-5.0f, d3, d5));                                                    \
    }
/* 16 fmas: input channel V (16 tiles) into each output channel's accumulator, its transformed
 * weight broadcast from U16 (16 consecutive output channels) */
#define WINO_FMA(k, V, U16) acc##k = fma(V, (float16)((U16)[k]), acc##k);
#define WINO_STEP(V, U16)                                                                          \
    WINO_FMA(0, V, U16) WINO_FMA(1, V, U16) WINO_FMA(2, V, U16) WINO_FMA(3, V, U16)                \
    WINO_FMA(4, V, U16) WINO_FMA(5, V, U16) WINO_FMA(6, V, U16) WINO_FMA(7, V, U16)                \
    WINO_FMA(8, V, U16) WINO_FMA(9, V, U16) WINO_FMA(10, V, U16) WINO_FMA(11, V, U16)              \
    WINO_FMA(12, V, U16) WINO_FMA(13, V, U16) WINO_FMA(14, V, U16) WINO_FMA(15, V, U16)
#define WINO_M(k) M[j * WINO_OC + ob + k] = acc##k;

/* The input channels conv_wino5 transforms at a time (its private V holds 36 x WINO_C
 * vectors), and the most output channels it takes (OCp <= WINO_OC). */
#define WINO_C 32
#define WINO_OC 64

/* One patch element of 16 tiles, twv tiles a tile row, tile row q's read at r_q: neighbouring
 * tiles' patches start 2 columns apart, so a tile row's values are the even lanes of a load. */
static IG_INLINE float16 wino_gather(__global const float *r0, __global const float *r1,
                                     __global const float *r2, __global const float *r3,
                                     const int twv) {
    if (twv == 8) return (float16)(vload16(0, r0).even, vload16(0, r1).even);
    return (float16)(vload8(0, r0).even, vload8(0, r1).even, vload8(0, r2).even,
                     vload8(0, r3).even);
}

/* The first `count` of n (n = 4 or 8) values of v at p. */
static IG_INLINE void wino_store_f(__global float *p, const float *v, int count, const int n) {
    if (count == n) {
        if (n == 8) vstore8(vload8(0, v), 0, p);
        else vstore4(vload4(0, v), 0, p);
        return;
    }
    for (int e = 0; e < count; e++) p[e] = v[e];
}

/* conv_wino5's body for TWV tiles per tile row (8 or 4: 2 or 4 tile rows of 16 lanes). */
static IG_INLINE void wino5_forward(__global float *y, int yoff, __global const float *xp,
                                    __global const float *U, int OCp, __global const float *w,
                                    int boff, int has_bias, int C, int Hp, int Wp, int OC, int OH,
                                    int OW, __global int *argmax, int pool, __global float *ypad,
                                    int hand, int only, const int twv) {
    const int rq = 16 / twv;
    int TH = (OH + 1) / 2, TW = (OW + 1) / 2;
    int tx0 = get_global_id(0) * twv, ty0 = get_global_id(1) * rq, n = get_global_id(2);
    float16 V[36 * WINO_C], M[6 * WINO_OC], Y[4 * WINO_OC], T[36];
    for (int cb = 0; cb < C; cb += WINO_C) {
        int nc = min(WINO_C, C - cb);
        /* V[p][c] = (B^T d B)[p] of channel cb + c, 16 tiles in the lanes; rows past the
         * tiles read the last tile row's (not stored) */
        for (int c = 0; c < nc; c++) {
            __global const float *pl = xp + ((long)n * C + cb + c) * Hp * Wp + 2 * tx0;
            __global const float *r0 = pl + 2 * min(ty0, TH - 1) * Wp;
            __global const float *r1 = pl + 2 * min(ty0 + 1, TH - 1) * Wp;
            __global const float *r2 = pl + 2 * min(ty0 + 2, TH - 1) * Wp;
            __global const float *r3 = pl + 2 * min(ty0 + 3, TH - 1) * Wp;
            for (int a = 0; a < 6; a++) {
                int o = a * Wp;
                float16 d0 = wino_gather(r0 + o, r1 + o, r2 + o, r3 + o, twv);
                float16 d1 = wino_gather(r0 + o + 1, r1 + o + 1, r2 + o + 1, r3 + o + 1, twv);
                float16 d2 = wino_gather(r0 + o + 2, r1 + o + 2, r2 + o + 2, r3 + o + 2, twv);
                float16 d3 = wino_gather(r0 + o + 3, r1 + o + 3, r2 + o + 3, r3 + o + 3, twv);
                float16 d4 = wino_gather(r0 + o + 4, r1 + o + 4, r2 + o + 4, r3 + o + 4, twv);
                float16 d5 = wino_gather(r0 + o + 5, r1 + o + 5, r2 + o + 5, r3 + o + 5, twv);
                WINO_BT(d0, d1, d2, d3, d4, d5, T[a * 6], T[a * 6 + 1], T[a * 6 + 2],
                        T[a * 6 + 3], T[a * 6 + 4], T[a * 6 + 5])
            }
            for (int j = 0; j < 6; j++) {
                float16 o0, o1, o2, o3, o4, o5;
                WINO_BT(T[j], T[6 + j], T[12 + j], T[18 + j], T[24 + j], T[30 + j], o0, o1, o2,
                        o3, o4, o5)
                V[j * WINO_C + c] = o0;
                V[(6 + j) * WINO_C + c] = o1;
                V[(12 + j) * WINO_C + c] = o2;
                V[(18 + j) * WINO_C + c] = o3;
                V[(24 + j) * WINO_C + c] = o4;
                V[(30 + j) * WINO_C + c] = o5;
            }
        }
        /* per row i of points: M[j][oc] = sum over c of V[6i+j][c] * U[6i+j][c][oc] (16
         * channels in 16 accumulators, each V vector read while in L1 for all OCp), then
         * Y[oc][r][s] += A^T[r][i] * sum over j of M[j][oc] * A^T[s][j] */
        for (int i = 0; i < 6; i++) {
            for (int j = 0; j < 6; j++) {
                int p = i * 6 + j;
                __private const float16 *vp = V + p * WINO_C;
                for (int ob = 0; ob < OCp; ob += 16) {
                    float16 acc0 = 0, acc1 = 0, acc2 = 0, acc3 = 0, acc4 = 0, acc5 = 0;
                    float16 acc6 = 0, acc7 = 0, acc8 = 0, acc9 = 0, acc10 = 0, acc11 = 0;
                    float16 acc12 = 0, acc13 = 0, acc14 = 0, acc15 = 0;
                    __global const float *u = U + ((long)p * C + cb) * OCp + ob;
                    int c = 0;
                    for (; c + 2 <= nc; c += 2, u += 2 * OCp) { /* two channels a turn */
                        float16 v0 = vp[c], v1 = vp[c + 1];
                        WINO_STEP(v0, u)
                        WINO_STEP(v1, u + OCp)
                    }
                    if (c < nc) {
                        float16 v0 = vp[c];
                        WINO_STEP(v0, u)
                    }
                    WINO_M(0) WINO_M(1) WINO_M(2) WINO_M(3) WINO_M(4) WINO_M(5) WINO_M(6)
                    WINO_M(7) WINO_M(8) WINO_M(9) WINO_M(10) WINO_M(11) WINO_M(12) WINO_M(13)
                    WINO_M(14) WINO_M(15)
                }
            }
            /* A^T's column i: (1, 0), (1, 1), (1, -1), (1, 2), (1, -2), (0, 1) */
            float a0 = i < 5 ? 1.0f : 0.0f;
            float a1 = i == 0 ? 0.0f : i == 1 || i == 5 ? 1.0f : i == 2 ? -1.0f : i == 3 ? 2.0f : -2.0f;
            int first = i == 0 && cb == 0;
            for (int k = 0; k < OCp; k++) {
                float16 m0 = M[k], m1 = M[WINO_OC + k], m2 = M[2 * WINO_OC + k];
                float16 m3 = M[3 * WINO_OC + k], m4 = M[4 * WINO_OC + k], m5 = M[5 * WINO_OC + k];
                float16 z0 = m0 + m1 + m2 + m3 + m4, z1 = m1 - m2 + 2.0f * (m3 - m4) + m5;
                __private float16 *yk = Y + 4 * k;
                yk[0] = first ? a0 * z0 : fma(a0, z0, yk[0]);
                yk[1] = first ? a0 * z1 : fma(a0, z1, yk[1]);
                yk[2] = first ? a1 * z0 : fma(a1, z0, yk[2]);
                yk[3] = first ? a1 * z1 : fma(a1, z1, yk[3]);
            }
        }
    }
    /* the store: lane l is tile (ty0 + l/twv, tx0 + l%twv), outputs (2ty + r, 2tx + s) in
     * Y[oc][2r + s] */
    int16 lane = (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (int oc = 0; oc < OC && oc < OCp; oc++) {
        float bias = has_bias ? w[boff + oc] : 0.0f;
        float16 y00 = Y[4 * oc] + bias, y01 = Y[4 * oc + 1] + bias;
        float16 y10 = Y[4 * oc + 2] + bias, y11 = Y[4 * oc + 3] + bias;
        if (pool) {
            /* MaxPool2d(2) over each tile, as pool8_store: scan order, strict '>', NaN wins */
            int PH = OH / 2, PW = OW / 2, cnt = min(twv, PW - tx0);
            float16 m;
            int16 best;
            POOL_MAX4(int16, y00, y01, y10, y11, OW, m, best)
            int16 idx = 2 * (ty0 + lane / twv) * OW + 2 * (tx0 + lane % twv) + best;
            float tm[16];
            int ti[16];
            vstore16(m, 0, tm);
            vstore16(idx, 0, ti);
            for (int q = 0; q < rq && cnt > 0; q++) {
                int ph = ty0 + q;
                if (ph >= PH) break;
                long o = ((long)(n * OC + oc) * PH + ph) * PW + tx0;
                if (!only) wino_store_f(y + yoff + o, tm + q * twv, cnt, twv);
                for (int e = 0; e < cnt; e++) argmax[o + e] = ti[q * twv + e];
                if (hand >= 0)
                    wino_store_f(ypad + ((long)(n * OC + oc) * (PH + 2 * hand) + ph + hand) *
                                            (PW + 2 * hand) + tx0 + hand,
                                 tm + q * twv, cnt, twv);
            }
            continue;
        }
        __global float *yo = y + yoff + (long)(n * OC + oc) * OH * OW + 2 * tx0;
        int cnt = min(2 * twv, OW - 2 * tx0);
        for (int q = 0; q < rq; q++) {
            int oh = 2 * (ty0 + q);
            if (oh >= OH) break;
            /* output rows oh and oh + 1: the tile row's lanes of y_r0 and y_r1 interleaved */
            float t0[16], t1[16];
            if (twv == 8) {
                uint16 mk = (uint16)(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23) +
                            (uint16)(8 * q);
                vstore16(shuffle2(y00, y01, mk), 0, t0);
                vstore16(shuffle2(y10, y11, mk), 0, t1);
            } else {
                uint8 mk = (uint8)(0, 16, 1, 17, 2, 18, 3, 19) + (uint8)(4 * q);
                vstore8(shuffle2(y00, y01, mk), 0, t0);
                vstore8(shuffle2(y10, y11, mk), 0, t1);
            }
            for (int h = 0; h < 2 && oh + h < OH; h++) {
                __global float *d = yo + (oh + h) * OW;
                const float *src = h ? t1 : t0;
                if (cnt == 16)
                    vstore16(vload16(0, src), 0, d);
                else if (cnt == 8 && twv == 4)
                    vstore8(vload8(0, src), 0, d);
                else
                    for (int e = 0; e < cnt; e++) d[e] = src[e];
            }
        }
    }
}

/* One work-item per work-group computes 16 tiles (2x2 outputs each) of one image, all output
 * channels: the input transform of every input channel into V (private, 36 x WINO_C vectors;
 * more channels go in blocks), the products with U (wino5_weights) summed over channels, and
 * the output transform, then either the output NCHW with its bias (pool 0) or a fused
 * MaxPool2d(2) as conv_direct_s1's (y pooled unless `only`, argmax, and with hand >= 0 the
 * padded hand-off ypad). Reads of tiles past the map come from the padded input's slack and
 * are not stored. conv_wino5: 8 tiles x 2 tile rows per work-item (maps over 8 wide), global =
 * (ceil(TW/8), ceil(TH/2), N); conv_wino5_w4: 4 x 4 (maps at most 8 wide), global = (1,
 * ceil(TH/4), N); TW, TH = ceil(OW/2), ceil(OH/2). Needs K == 5 and OCp <= WINO_OC. */
#define WINO_KERNEL(NAME, TWV)                                                                     \
    __kernel __attribute__((reqd_work_group_size(1, 1, 1))) void NAME(                             \
        __global float *y, int yoff, __global const float *xp, __global const float *U, int OCp,   \
        __global const float *w, int boff, int has_bias, int C, int Hp, int Wp, int OC, int K,     \
        int OH, int OW, __global int *argmax, int pool, __global float *ypad, int hand,            \
        int only) {                                                                                \
        wino5_forward(y, yoff, xp, U, OCp, w, boff, has_bias, C, Hp, Wp, OC, OH, OW, argmax, pool, \
                      ypad, hand, only, TWV);                                                      \
    }
WINO_KERNEL(conv_wino5, 8)
WINO_KERNEL(conv_wino5_w4, 4)
