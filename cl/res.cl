/* The residual block's kernels (src/layers/res.c): the sum at its end, and the copy that hands
 * its output gradient to both addends. */

/* y = a + b */
__kernel void add_f32(__global float *y, __global const float *a, __global const float *b, int n) {
    int i = get_global_id(0);
    if (i < n) y[i] = a[i] + b[i];
}

/* The same with the padded hand-off: one work-item per row r (nc*H + h) of the sum, written
 * also into ypad, the next convolution's padded input as pad_input writes it (planes of
 * (H + 2*hand) x (W + 2*hand) whose zeros are already there), and with `only` there alone
 * (nothing reads y). */
__kernel void add_f32_pad(__global float *y, __global const float *a, __global const float *b,
                          int rows, int H, int W, __global float *ypad, int hand, int only) {
    int r = get_global_id(0);
    if (r >= rows) return;
    long o = (long)r * W;
    int Wq = W + 2 * hand;
    __global float *d = ypad + ((long)(r / H) * (H + 2 * hand) + r % H + hand) * Wq + hand;
    int w = 0;
    for (; w + 16 <= W; w += 16) {
        float16 v = vload16(0, a + o + w) + vload16(0, b + o + w);
        vstore16(v, 0, d + w);
        if (!only) vstore16(v, 0, y + o + w);
    }
    for (; w < W; w++) {
        float v = a[o + w] + b[o + w];
        d[w] = v;
        if (!only) y[o + w] = v;
    }
}

/* y = x */
__kernel void copy_f32(__global float *y, __global const float *x, int n) {
    int i = get_global_id(0);
    if (i < n) y[i] = x[i];
}
