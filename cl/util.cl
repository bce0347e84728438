/* Element-wise helpers used across the engine: fill, axpy, scale. OpenCL C 1.2.
 * Every buffer argument comes with an element offset, so views into one allocation work
 * without sub-buffers (whose alignment rules differ between devices). */

/* x[off + i] = value for i < n */
__kernel void fill_f32(__global float *x, int off, int n, float value) {
    int i = get_global_id(0);
    if (i < n) x[off + i] = value;
}

/* y[yoff + i] += alpha * x[xoff + i] for i < n */
__kernel void axpy_f32(__global float *y, int yoff, __global const float *x, int xoff, int n,
                       float alpha) {
    int i = get_global_id(0);
    if (i < n) y[yoff + i] = fma(alpha, x[xoff + i], y[yoff + i]);
}

/* Peak fp32 throughput probe: sixteen independent float16 FMA chains per work-item, nothing
 * but registers. out[i] keeps the compiler from removing the work. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void peak_fma(__global float *out,
                                                                      int iters, float a) {
    float16 b = (float16)(a), c0 = b, c1 = b + 1, c2 = b + 2, c3 = b + 3, c4 = b + 4, c5 = b + 5;
    float16 c6 = b + 6, c7 = b + 7, c8 = b + 8, c9 = b + 9, c10 = b + 10, c11 = b + 11;
    float16 c12 = b + 12, c13 = b + 13, c14 = b + 14, c15 = b + 15, m = (float16)(0.999f);
    for (int i = 0; i < iters; i++) {
        c0 = fma(c0, m, b), c1 = fma(c1, m, b), c2 = fma(c2, m, b), c3 = fma(c3, m, b);
        c4 = fma(c4, m, b), c5 = fma(c5, m, b), c6 = fma(c6, m, b), c7 = fma(c7, m, b);
        c8 = fma(c8, m, b), c9 = fma(c9, m, b), c10 = fma(c10, m, b), c11 = fma(c11, m, b);
        c12 = fma(c12, m, b), c13 = fma(c13, m, b), c14 = fma(c14, m, b), c15 = fma(c15, m, b);
    }
    float16 s = c0 + c1 + c2 + c3 + c4 + c5 + c6 + c7 + c8 + c9 + c10 + c11 + c12 + c13 + c14 + c15;
    out[get_global_id(0)] = s.s0 + s.s1 + s.s2 + s.s3 + s.s4 + s.s5 + s.s6 + s.s7 + s.s8 + s.s9 +
                            s.sa + s.sb + s.sc + s.sd + s.se + s.sf;
}
