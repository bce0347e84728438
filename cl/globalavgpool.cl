/* AdaptiveAvgPool2d(1)'s kernels (src/layers/globalavgpool.c). Offsets are in elements. */

/* y[nc] = mean of the plane x[nc*HW .. nc*HW + HW): one work-item per (n, c) plane, sixteen
 * partial sums over the plane read as float16s (a plane need not be aligned: vload16), then
 * the tail; divided by HW as PyTorch's mean, the form AdaptiveAvgPool2d(1) takes. */
__kernel void globalavgpool_forward(__global float *y, int yoff, __global const float *x, int xoff,
                                    int NC, int HW) {
    int nc = get_global_id(0);
    if (nc >= NC) return;
    __global const float *p = x + xoff + nc * HW;
    int hw16 = HW & ~15;
    float16 acc = 0.0f;
    float tail = 0.0f;
    for (int i = 0; i < hw16; i += 16)
        acc += vload16(0, p + i);
    for (int i = hw16; i < HW; i++)
        tail += p[i];
    float8 h8 = acc.lo + acc.hi;
    float4 h4 = h8.lo + h8.hi;
    float2 h2 = h4.lo + h4.hi;
    y[yoff + nc] = (h2.x + h2.y + tail) / (float)HW;
}

/* gx[nc*HW + i] = gy[nc] / HW (the backward of a mean, as PyTorch divides): one work-item per
 * sixteen elements of a plane (chunks = ceil(HW / 16) per plane), stored as one float16 where
 * the chunk is whole. */
__kernel void globalavgpool_backward(__global float *gx, int gxoff, __global const float *gy,
                                     int gyoff, int NC, int HW, int chunks) {
    int i = get_global_id(0);
    if (i >= NC * chunks) return;
    int nc = i / chunks, c = (i - nc * chunks) * 16;
    float v = gy[gyoff + nc] / (float)HW;
    __global float *p = gx + gxoff + nc * HW + c;
    if (c + 16 <= HW) {
        vstore16((float16)(v), 0, p);
        return;
    }
    for (int k = 0; k < HW - c; k++)
        p[k] = v;
}
