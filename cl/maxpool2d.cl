/* MaxPool2d's kernels (src/layers/maxpool2d.c). Offsets are in elements. */

/* PyTorch MaxPool2d (floor mode): the first maximum in window scan order wins (strict '>'),
 * a NaN always wins, padding never does. argmax = ih*W + iw within the (n,c) plane. */
__kernel void maxpool_forward(__global float *y, int yoff, __global int *argmax,
                              __global const float *x, int xoff, int NC, int H, int W, int K,
                              int stride, int pad, int OH, int OW) {
    int i = get_global_id(0);
    if (i >= NC * OH * OW) return;
    int ow = i % OW, oh = (i / OW) % OH, nc = i / (OW * OH);
    int h0 = oh * stride - pad, w0 = ow * stride - pad;
    int h1 = min(h0 + K, H), w1 = min(w0 + K, W);
    h0 = max(h0, 0);
    w0 = max(w0, 0);
    __global const float *plane = x + xoff + nc * H * W;
    int best = h0 * W + w0;
    float m = -INFINITY;
    for (int h = h0; h < h1; h++) {
        for (int w = w0; w < w1; w++) {
            float v = plane[h * W + w];
            if (v > m || isnan(v)) {
                m = v;
                best = h * W + w;
            }
        }
    }
    y[yoff + i] = m;
    argmax[i] = best;
}

/* MaxPool2d(2) (kernel 2, stride 2, no padding), the common case. Same rule as
 * maxpool_forward: scan order (0,0), (0,1), (1,0), (1,1), strict '>', a NaN wins. One
 * work-item per output row, eight windows per step from two 16-wide loads of its two input
 * rows (four from 8-wide loads on rows under 8 windows); a row's last step is its last eight
 * (four) windows, overlapping the one before and writing the same values again, so no
 * scalar tail remains. Needs OW >= 4 (maxpool2_forward_px below takes narrower rows). The padded
 * hand-off: with hand >= 0 each row goes also into ypad, the next convolution's padded input as
 * pad_input writes it (planes of (OH + 2*hand) x (OW + 2*hand) whose zeros are already there),
 * and with `only` there alone (nothing reads y); ypad is not touched when hand < 0. (Not in
 * the per-output kernels: their scattered stores cost more than the padding pass saves.) */
/* window value v (offset w from the window's top-left) replaces the running maximum m if
 * larger or NaN */
#define POOL2_PICK(v, w) c = ((v) > m) | isnan(v), m = select(m, (v), c), best = select(best, w, c)
__kernel void maxpool2_forward(__global float *y, int yoff, __global int *argmax,
                               __global const float *x, int xoff, int NC, int H, int W, int OH,
                               int OW, __global float *ypad, int hand, int only) {
    int r = get_global_id(0);
    if (r >= NC * OH) return;
    int oh = r % OH, nc = r / OH;
    __global const float *x0 = x + xoff + ((long)nc * H + 2 * oh) * W, *x1 = x0 + W;
    __global float *yr = y + yoff + (long)r * OW;
    long q = ((long)nc * (OH + 2 * hand) + oh + hand) * (OW + 2 * hand) + hand;
    __global float *pr = hand < 0 ? 0 : ypad + q;
    __global int *ar = argmax + (long)r * OW;
    int base = 2 * oh * W;
    if (OW >= 8) {
        const int8 lane = 2 * (int8)(0, 1, 2, 3, 4, 5, 6, 7);
        for (int ow = 0; ow < OW; ow += 8) {
            int o = min(ow, OW - 8);
            float16 t = vload16(0, x0 + 2 * o), u = vload16(0, x1 + 2 * o);
            float8 m = t.even;
            int8 best = (int8)(0), c;
            POOL2_PICK(t.odd, (int8)(1));
            POOL2_PICK(u.even, (int8)(W));
            POOL2_PICK(u.odd, (int8)(W + 1));
            if (!only) vstore8(m, 0, yr + o);
            if (pr) vstore8(m, 0, pr + o);
            vstore8(base + 2 * o + lane + best, 0, ar + o);
        }
        return;
    }
    {
        const int4 lane = 2 * (int4)(0, 1, 2, 3);
        for (int ow = 0; ow < OW; ow += 4) {
            int o = min(ow, OW - 4);
            float8 t = vload8(0, x0 + 2 * o), u = vload8(0, x1 + 2 * o);
            float4 m = t.even;
            int4 best = (int4)(0), c;
            POOL2_PICK(t.odd, (int4)(1));
            POOL2_PICK(u.even, (int4)(W));
            POOL2_PICK(u.odd, (int4)(W + 1));
            if (!only) vstore4(m, 0, yr + o);
            if (pr) vstore4(m, 0, pr + o);
            vstore4(base + 2 * o + lane + best, 0, ar + o);
        }
    }
}

/* MaxPool2d(2) on rows under 4 windows: one work-item per output, neighbours along a row, so
 * a CPU device's work-group vectorizer turns the window's reads into vector loads. */
__kernel void maxpool2_forward_px(__global float *y, int yoff, __global int *argmax,
                                  __global const float *x, int xoff, int NC, int H, int W, int OH,
                                  int OW) {
    int i = get_global_id(0);
    if (i >= NC * OH * OW) return;
    int ow = i % OW, r = i / OW, oh = r % OH, nc = r / OH;
    int p = 2 * oh * W + 2 * ow;
    __global const float *q = x + xoff + (long)nc * H * W + p;
    float a = q[0], b = q[1], c = q[W], d = q[W + 1], m = a;
    int best = 0;
    if (b > m || isnan(b)) m = b, best = 1;
    if (c > m || isnan(c)) m = c, best = W;
    if (d > m || isnan(d)) m = d, best = W + 1;
    y[yoff + i] = m;
    argmax[i] = p + best;
}

/* gx[n,c,ih,iw] = sum of gy over the outputs whose argmax is this pixel. Gather form: windows
 * may overlap (stride < K), and a fixed summation order keeps runs repeatable. */
__kernel void maxpool_backward(__global float *gx, int gxoff, __global const float *gy, int gyoff,
                               __global const int *argmax, int NC, int H, int W, int K, int stride,
                               int pad, int OH, int OW) {
    int i = get_global_id(0);
    if (i >= NC * H * W) return;
    int iw = i % W, ih = (i / W) % H, nc = i / (W * H);
    int idx = ih * W + iw;
    /* Outputs whose window [oh*s - p, oh*s - p + K) contains ih. */
    int oh_lo = max(0, (ih + pad - K + stride) / stride);
    int oh_hi = min(OH - 1, (ih + pad) / stride);
    int ow_lo = max(0, (iw + pad - K + stride) / stride);
    int ow_hi = min(OW - 1, (iw + pad) / stride);
    float acc = 0.0f;
    for (int oh = oh_lo; oh <= oh_hi; oh++)
        for (int ow = ow_lo; ow <= ow_hi; ow++) {
            int o = (nc * OH + oh) * OW + ow;
            if (argmax[o] == idx) acc += gy[gyoff + o];
        }
    gx[gxoff + i] = acc;
}

/* The backward of maxpool2_forward: one work-item per output row writes both input rows of
 * its windows whole (gy at the argmax, zeros elsewhere), plus the odd column or row that no
 * window covers, so no separate zero fill is needed. Eight windows per step (four on rows
 * under eight); as in the forward, a row's last step overlaps the one before, writing the same
 * values again, and rows under four windows go one window at a time. */
__kernel void maxpool2_backward(__global float *gx, int gxoff, __global const float *gy, int gyoff,
                                __global const int *argmax, int NC, int H, int W, int OH, int OW) {
    int r = get_global_id(0);
    if (r >= NC * OH) return;
    int oh = r % OH, nc = r / OH;
    __global float *g0 = gx + gxoff + (nc * H + 2 * oh) * W, *g1 = g0 + W;
    __global const float *gr = gy + gyoff + r * OW;
    __global const int *ar = argmax + r * OW;
    int ow = 0;
    if (OW >= 8) { /* two 16-wide input rows per step */
        const uint16 mix = (uint16)(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
        for (; ow < OW; ow += 8) {
            int o = min(ow, OW - 8);
            float8 v = vload8(0, gr + o), z = (float8)(0.0f);
            int8 b = vload8(0, ar + o) - (2 * oh * W + 2 * o + 2 * (int8)(0, 1, 2, 3, 4, 5, 6, 7));
            vstore16(shuffle2(select(z, v, b == 0), select(z, v, b == 1), mix), 0, g0 + 2 * o);
            vstore16(shuffle2(select(z, v, b == W), select(z, v, b == W + 1), mix), 0, g1 + 2 * o);
        }
    } else if (OW >= 4) { /* two 8-wide input rows per step */
        const uint8 mix = (uint8)(0, 4, 1, 5, 2, 6, 3, 7);
        for (; ow < OW; ow += 4) {
            int o = min(ow, OW - 4);
            float4 v = vload4(0, gr + o), z = (float4)(0.0f);
            int4 b = vload4(0, ar + o) - (2 * oh * W + 2 * o + 2 * (int4)(0, 1, 2, 3));
            vstore8(shuffle2(select(z, v, b == 0), select(z, v, b == 1), mix), 0, g0 + 2 * o);
            vstore8(shuffle2(select(z, v, b == W), select(z, v, b == W + 1), mix), 0, g1 + 2 * o);
        }
    }
    for (; ow < OW; ow++) {
        float v = gr[ow];
        int b = ar[ow] - 2 * oh * W - 2 * ow;
        g0[2 * ow] = b == 0 ? v : 0.0f;
        g0[2 * ow + 1] = b == 1 ? v : 0.0f;
        g1[2 * ow] = b == W ? v : 0.0f;
        g1[2 * ow + 1] = b == W + 1 ? v : 0.0f;
    }
    if (W > 2 * OW) g0[W - 1] = g1[W - 1] = 0.0f;
    if (oh == OH - 1)
        for (int i = (2 * OH) * W; i < H * W; i++)
            g0[i - 2 * oh * W] = 0.0f;
}

/* Non-overlapping windows (stride >= K): each input pixel belongs to at most one window, so
 * the gradient is a scatter of gy to the argmax positions of a zeroed gx; one work-item per
 * output. Much cheaper than the gather above, and still free of write conflicts. */
__kernel void maxpool_backward_scatter(__global float *gx, int gxoff, __global const float *gy,
                                       int gyoff, __global const int *argmax, int NC, int H, int W,
                                       int OH, int OW) {
    int o = get_global_id(0);
    if (o >= NC * OH * OW) return;
    int nc = o / (OH * OW);
    gx[gxoff + nc * H * W + argmax[o]] = gy[gyoff + o];
}
