/* AdaptiveMaxPool2d(1)'s kernels (src/layers/globalmaxpool.c). Offsets are in elements. */

/* Whether (b, ib) beats (a, ia) when two partial scans merge: of two NaNs the larger index (the
 * later NaN), a NaN over a number, else the larger value, on a tie the smaller index (the
 * earlier maximum). Component-wise on vectors (true is -1) and on scalars. NaN tests are
 * x != x, which OpenCL keeps exact without fast-math options. */
#define BEATS(a, ia, b, ib)                                                                        \
    ((((b) != (b)) & (((a) == (a)) | ((ib) > (ia)))) | ((b) > (a)) | (((b) == (a)) & ((ib) < (ia))))

/* y[nc], argmax[nc] = the maximum of the plane x[nc*HW .. nc*HW + HW) and its index, by
 * PyTorch's CPU rule (AdaptiveMaxPoolKernel.cpp): scanning in order from (-inf, index 0), an
 * element replaces the maximum when it is strictly greater or is a NaN. So ties go to the
 * first maximum, the last NaN wins, and an all -inf plane gives index 0.
 * One work-item per plane, sixteen lanes: lane j scans the elements j, j+16, ... by that rule,
 * starting from (-inf, j); the lanes then merge by BEATS, which gives the rule's result over
 * the elements scanned so far, and the scan goes on over the tail. */
__kernel void globalmaxpool_forward(__global float *y, int yoff, __global int *argmax,
                                    __global const float *x, int xoff, int NC, int HW) {
    int nc = get_global_id(0);
    if (nc >= NC) return;
    __global const float *p = x + xoff + nc * HW;
    int hw16 = HW & ~15;
    float16 m16 = -INFINITY;
    int16 i16 = (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), at = i16;
    for (int i = 0; i < hw16; i += 16, at += 16) {
        float16 v = vload16(0, p + i);
        int16 take = (v > m16) | (v != v);
        m16 = select(m16, v, take);
        i16 = select(i16, at, take);
    }
    int8 t8 = BEATS(m16.lo, i16.lo, m16.hi, i16.hi);
    float8 m8 = select(m16.lo, m16.hi, t8);
    int8 i8 = select(i16.lo, i16.hi, t8);
    int4 t4 = BEATS(m8.lo, i8.lo, m8.hi, i8.hi);
    float4 m4 = select(m8.lo, m8.hi, t4);
    int4 i4 = select(i8.lo, i8.hi, t4);
    int2 t2 = BEATS(m4.lo, i4.lo, m4.hi, i4.hi);
    float2 m2 = select(m4.lo, m4.hi, t2);
    int2 i2 = select(i4.lo, i4.hi, t2);
    int t = BEATS(m2.x, i2.x, m2.y, i2.y);
    float m = t ? m2.y : m2.x;
    int best = t ? i2.y : i2.x;
    for (int i = hw16; i < HW; i++) {
        float v = p[i];
        int take = v > m || v != v;
        m = take ? v : m;
        best = take ? i : best;
    }
    y[yoff + nc] = m;
    argmax[nc] = best;
}

/* gx[nc*HW + i] = gy[nc] at the plane's argmax, 0 elsewhere: one work-item per sixteen
 * elements of a plane (chunks = ceil(HW / 16) per plane), stored as one float16 where the chunk
 * is whole. */
__kernel void globalmaxpool_backward(__global float *gx, int gxoff, __global const float *gy,
                                     int gyoff, __global const int *argmax, int NC, int HW,
                                     int chunks) {
    int i = get_global_id(0);
    if (i >= NC * chunks) return;
    int nc = i / chunks, c = (i - nc * chunks) * 16;
    int at = argmax[nc] - c;
    float v = gy[gyoff + nc];
    __global float *p = gx + gxoff + nc * HW + c;
    if (c + 16 <= HW) {
        const int16 lane = (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        vstore16(select((float16)(0.0f), (float16)(v), lane == at), 0, p);
        return;
    }
    for (int k = 0; k < HW - c; k++)
        p[k] = k == at ? v : 0.0f;
}
