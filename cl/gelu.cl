/* GELU's kernels (src/layers/gelu.c): the exact form of nn.GELU(), with erf. */

/* y = x * 0.5 * (1 + erf(x / sqrt(2))) */
__kernel void gelu_forward(__global float *y, __global const float *x, int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    float v = x[i];
    y[i] = v * 0.5f * (1.0f + erf(v * M_SQRT1_2_F));
}

/* gx = gy * (Phi(x) + x * phi(x)): Phi the normal CDF, phi its density (PyTorch's
 * GeluBackward for approximate='none'). */
__kernel void gelu_backward(__global float *gx, __global const float *gy, __global const float *x,
                            int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    float v = x[i];
    float cdf = 0.5f * (1.0f + erf(v * M_SQRT1_2_F));
    float pdf = exp(-0.5f * v * v) * (M_2_SQRTPI_F * M_SQRT1_2_F * 0.5f);
    gx[i] = gy[i] * (cdf + v * pdf);
}
