/* Helpers shared across the engine: fill, axpy, the bias gradient, the peak probe. OpenCL C 1.2.
 * Every buffer argument comes with an element offset, so views into one allocation work
 * without sub-buffers (whose alignment rules differ between devices). */

/* gb[boff + c] (+)= sum over n < N, p < HW of gy[gyoff + (n*C + c)*HW + p]. Shared by Conv2d
 * (HW = OH*OW) and Linear (HW = 1). */
__kernel void bias_grad(__global float *gb, int boff, __global const float *gy, int gyoff, int N,
                        int C, int HW, int accumulate) {
    int c = get_global_id(0);
    if (c >= C) return;
    /* Sixteen partial sums along each row (the seed's conv0 sums 65536 values per channel: a
     * single scalar chain of dependent adds was 50x slower), then the row's tail. */
    float16 acc = 0.0f;
    float tail = 0.0f;
    int hw16 = HW & ~15;
    for (int n = 0; n < N; n++) {
        __global const float *row = gy + gyoff + (n * C + c) * HW;
        for (int p = 0; p < hw16; p += 16) acc += vload16(0, row + p);
        for (int p = hw16; p < HW; p++) tail += row[p];
    }
    float8 h8 = acc.lo + acc.hi;
    float4 h4 = h8.lo + h8.hi;
    float2 h2 = h4.lo + h4.hi;
    float sum = h2.x + h2.y + tail;
    gb[boff + c] = accumulate ? gb[boff + c] + sum : sum;
}

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

/* Peak fp32 throughput probes, nothing but registers: twelve independent FMA chains of TYPE per
 * work-item (12 >= FMA latency x FMA ports on current CPUs, and 12 accumulators + 2 fit in the
 * 16 registers of AVX2). Every chain and every lane starts from a different value that depends
 * on the work-item and a run-time argument, so a compiler can neither prove two of them equal and
 * merge them into one vector (splatted lanes invite scalarising and SLP re-packing) nor fold the
 * loop; out[] keeps the work alive. One kernel per vector width: the host launches the one of
 * the device's preferred float width (PoCL on AVX-512: float16, one work-item per group; Intel's
 * CPU runtime and most GPUs: float, full work-groups). No reqd_work_group_size: the host picks a
 * legal local size. */
#define PEAK_FMA(NAME, TYPE, LANES)                                                                \
    __kernel void NAME(__global TYPE *out, int iters, float a) {                                   \
        const TYPE m = (TYPE)(0.999f);                                                             \
        TYPE b = (TYPE)(a),                                                                        \
             c0 = b + (float)get_global_id(0) * 0.000244140625f + LANES * 0.015625f;               \
        TYPE c1 = c0 + 1, c2 = c0 + 2, c3 = c0 + 3, c4 = c0 + 4, c5 = c0 + 5, c6 = c0 + 6;         \
        TYPE c7 = c0 + 7, c8 = c0 + 8, c9 = c0 + 9, c10 = c0 + 10, c11 = c0 + 11;                  \
        for (int i = 0; i < iters; i++) {                                                          \
            c0 = fma(c0, m, b), c1 = fma(c1, m, b), c2 = fma(c2, m, b), c3 = fma(c3, m, b);        \
            c4 = fma(c4, m, b), c5 = fma(c5, m, b), c6 = fma(c6, m, b), c7 = fma(c7, m, b);        \
            c8 = fma(c8, m, b), c9 = fma(c9, m, b), c10 = fma(c10, m, b);                          \
            c11 = fma(c11, m, b);                                                                  \
        }                                                                                          \
        out[get_global_id(0)] = c0 + c1 + c2 + c3 + c4 + c5 + c6 + c7 + c8 + c9 + c10 + c11;       \
    }
PEAK_FMA(peak_fma1, float, 0.0f)
PEAK_FMA(peak_fma4, float4, (float4)(0, 1, 2, 3))
PEAK_FMA(peak_fma8, float8, (float8)(0, 1, 2, 3, 4, 5, 6, 7))
PEAK_FMA(peak_fma16, float16, (float16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))
