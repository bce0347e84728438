/* Convolution helpers around the GEMM: im2col into a row-per-output-pixel matrix, the
 * row-matrix to NCHW scatter with bias, the NCHW gradient to row-matrix gather, col2im, and the
 * bias gradient. Shapes: x (N,C,H,W), y (N,OC,OH,OW); a "row matrix" has one row per output
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

/* gb[boff + c] (+)= sum over n < N, p < HW of gy[gyoff + (n*C + c)*HW + p]. Shared by Conv2d
 * (HW = OH*OW) and Linear (HW = 1). */
__kernel void bias_grad(__global float *gb, int boff, __global const float *gy, int gyoff, int N,
                        int C, int HW, int accumulate) {
    int c = get_global_id(0);
    if (c >= C) return;
    float acc = 0.0f;
    for (int n = 0; n < N; n++) {
        __global const float *row = gy + gyoff + (n * C + c) * HW;
        for (int p = 0; p < HW; p++) acc += row[p];
    }
    gb[boff + c] = accumulate ? gb[boff + c] + acc : acc;
}

/* y[yoff + (n*C + c)*HW + p] += b[boff + c] */
__kernel void bias_add(__global float *y, int yoff, __global const float *b, int boff, int N,
                       int C, int HW) {
    int i = get_global_id(0);
    if (i >= N * C * HW) return;
    y[yoff + i] += b[boff + (i / HW) % C];
}

/* wf[c, oc, kh, kw] = w[woff + oc, c, K-1-kh, K-1-kw]: the weights of the convolution whose
 * forward pass is this layer's input gradient (stride 1: gx = conv(gy, wf, pad K-1-pad)). */
__kernel void flip_weights(__global float *wf, __global const float *w, int woff, int OC, int C,
                           int K) {
    int i = get_global_id(0);
    if (i >= OC * C * K * K) return;
    int kw = i % K, kh = (i / K) % K, oc = (i / (K * K)) % OC, c = i / (K * K * OC);
    wf[i] = w[woff + ((oc * C + c) * K + (K - 1 - kh)) * K + (K - 1 - kw)];
}
