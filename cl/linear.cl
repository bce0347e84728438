/* Linear's kernel (src/layers/linear.c); its GEMMs are the GEMM backend's and its bias
 * gradient is util.cl's bias_grad. */

/* y[yoff + (n*C + c)*HW + p] += b[boff + c] */
__kernel void bias_add(__global float *y, int yoff, __global const float *b, int boff, int N,
                       int C, int HW) {
    int i = get_global_id(0);
    if (i >= N * C * HW) return;
    y[yoff + i] += b[boff + (i / HW) % C];
}
