/* The elementwise product's kernels (src/layers/mul.c). */

/* y[i] = a[i] * b[i / hw] for i < n: b is a's shape (hw = 1) or one value per plane of a
 * (N x C x 1 x 1 against N x C x H x W, hw = H * W). Also the gradient of a: gy * b. */
__kernel void mul_bcast(__global float *y, __global const float *a, __global const float *b,
                        int hw, int n) {
    int i = get_global_id(0);
    if (i < n) y[i] = a[i] * b[i / hw];
}

/* The gradient of the broadcast factor: g[j] = sum over p < hw of gy[j*hw + p] * a[j*hw + p],
 * one work-item per plane j < m, summed in order. */
__kernel void mul_bcast_grad(__global float *g, __global const float *gy,
                             __global const float *a, int hw, int m) {
    int j = get_global_id(0);
    if (j >= m) return;
    long o = (long)j * hw;
    float s = 0.0f;
    for (int p = 0; p < hw; p++)
        s = fma(gy[o + p], a[o + p], s);
    g[j] = s;
}
