/* AvgPool2d's kernels (src/layers/avgpool2d.c). Offsets are in elements. */

/* PyTorch AvgPool2d (floor mode, count_include_pad): the window's in-bounds elements summed in
 * row-major order, in float, then divided by K*K (in floor mode with pad <= K/2 a window never
 * reaches past the padding, so its padded size is always K*K), as AvgPoolKernel.cpp does. */
__kernel void avgpool_forward(__global float *y, int yoff, __global const float *x, int xoff,
                              int NC, int H, int W, int K, int stride, int pad, int OH, int OW) {
    int i = get_global_id(0);
    if (i >= NC * OH * OW) return;
    int ow = i % OW, oh = (i / OW) % OH, nc = i / (OW * OH);
    int h0 = oh * stride - pad, w0 = ow * stride - pad;
    int h1 = min(h0 + K, H), w1 = min(w0 + K, W);
    h0 = max(h0, 0);
    w0 = max(w0, 0);
    __global const float *plane = x + xoff + nc * H * W;
    float sum = 0.0f;
    for (int h = h0; h < h1; h++)
        for (int w = w0; w < w1; w++)
            sum += plane[h * W + w];
    y[yoff + i] = sum / (float)(K * K);
}

/* gx[n,c,ih,iw] = sum over the windows that hold the pixel of gy / (K*K), gathered (no write
 * conflicts) in the order PyTorch's backward adds them: output rows, then columns, ascending.
 * One work-item per input row, which steps the column's window range along the row instead of
 * dividing for every pixel (5x faster than a work-item per pixel on a CPU device). */
__kernel void avgpool_backward(__global float *gx, int gxoff, __global const float *gy, int gyoff,
                               int NC, int H, int W, int K, int stride, int pad, int OH, int OW) {
    int r = get_global_id(0);
    if (r >= NC * H) return;
    int ih = r % H, nc = r / H;
    int oh_lo = max(0, (ih + pad - K + stride) / stride);
    int oh_hi = min(OH - 1, (ih + pad) / stride);
    float div = (float)(K * K);
    __global const float *g = gy + gyoff + nc * OH * OW;
    __global float *out = gx + gxoff + r * W;
    /* The windows of column iw are ow in [floor((iw + pad - K + stride) / stride),
     * floor((iw + pad) / stride)], clipped to [0, OW): both bounds as quotient and remainder,
     * stepped along the row. */
    int lo = pad - K + stride, hi = pad;
    int qlo = lo >= 0 ? lo / stride : -((stride - 1 - lo) / stride), rlo = lo - qlo * stride;
    int qhi = hi / stride, rhi = hi - qhi * stride;
    for (int iw = 0; iw < W; iw++) {
        int ow_lo = max(0, qlo), ow_hi = min(OW - 1, qhi);
        float acc = 0.0f;
        for (int oh = oh_lo; oh <= oh_hi; oh++)
            for (int ow = ow_lo; ow <= ow_hi; ow++)
                acc += g[oh * OW + ow] / div;
        out[iw] = acc;
        if (++rlo == stride) rlo = 0, qlo++;
        if (++rhi == stride) rhi = 0, qhi++;
    }
}
