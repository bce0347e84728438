/* ReLU's kernels (src/layers/relu.c). Offsets are in elements. */

/* y = x < 0 ? 0 : x (NaN passes through, as torch.relu) */
__kernel void relu_forward(__global float *y, int yoff, __global const float *x, int xoff, int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    float v = x[xoff + i];
    y[yoff + i] = v < 0.0f ? 0.0f : v;
}

/* gx = y <= 0 ? 0 : gy (PyTorch's threshold_backward on the output; a NaN passes gy) */
__kernel void relu_backward(__global float *gx, int gxoff, __global const float *gy, int gyoff,
                            __global const float *y, int yoff, int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    gx[gxoff + i] = y[yoff + i] <= 0.0f ? 0.0f : gy[gyoff + i];
}
