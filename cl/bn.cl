/* BatchNorm's kernels (src/layers/bn.c). x, y and their gradients are (N, C, HW) with element
 * offset 0. Per-channel sums go in two steps: each work-item of a *_partial kernel reduces one
 * chunk, the HW values of channel c in samples [g*S, min((g+1)*S, N)), into part[c*G + g] (and
 * a second sum into part[(C + c)*G + g]); a *_reduce kernel then combines each channel's G
 * partials. keep holds what the forward leaves for the backward: keep[c] the batch mean and
 * keep[C + c] the inverse standard deviation of channel c. With relu != 0 the node is
 * BatchNorm fused with the ReLU after it: the forward stores relu(bn(x)) and the backward
 * first masks gy by that output, as relu_backward does (y <= 0 gives 0, a NaN passes gy),
 * recomputing bn(x) by the forward's own expression (bn_out) rather than reading y back. */

/* bn(x) = (x - mean) * alpha + beta, alpha = invstd * weight: one explicit fma, so the
 * backward's recomputation is the forward's value to the bit. */
static float16 bn_out16(float16 x, float mean, float alpha, float beta) {
    return fma(x - mean, (float16)(alpha), (float16)(beta));
}

static float bn_out(float x, float mean, float alpha, float beta) {
    return fma(x - mean, alpha, beta);
}

/* acc (16 lanes) and *tail += the n floats at p. Sixteen partial sums, as bias_grad. */
static void bn_sum(float16 *acc, float *tail, __global const float *p, int n) {
    int n16 = n & ~15;
    for (int i = 0; i < n16; i += 16)
        *acc += vload16(0, p + i);
    for (int i = n16; i < n; i++)
        *tail += p[i];
}

/* acc and *tail += the squares of (p[i] - m) for i < n. */
static void bn_sum_sq(float16 *acc, float *tail, __global const float *p, int n, float m) {
    int n16 = n & ~15;
    for (int i = 0; i < n16; i += 16) {
        float16 d = vload16(0, p + i) - m;
        *acc += d * d;
    }
    for (int i = n16; i < n; i++)
        *tail += (p[i] - m) * (p[i] - m);
}

/* acc and *tail += the products g[i] * (p[i] - m) for i < n. */
static void bn_sum_dot(float16 *acc, float *tail, __global const float *g, __global const float *p,
                       int n, float m) {
    int n16 = n & ~15;
    for (int i = 0; i < n16; i += 16)
        *acc += vload16(0, g + i) * (vload16(0, p + i) - m);
    for (int i = n16; i < n; i++)
        *tail += g[i] * (p[i] - m);
}

/* The gradient through the fused ReLU: g where the BatchNorm output v is above 0 (or NaN),
 * else 0 (relu(v) <= 0 exactly when v <= 0). */
static float16 relu_mask16(float16 g, float16 v) {
    return select(g, (float16)(0.0f), v <= 0.0f);
}

static float relu_mask(float g, float v) {
    return v <= 0.0f ? 0.0f : g;
}

/* bn_sum and bn_sum_dot of g masked by the fused ReLU (its input recomputed from x at p, m,
 * alpha and beta), in one pass. */
static void bn_sums_masked(float16 *acc, float *tail, float16 *dacc, float *dtail,
                           __global const float *g, __global const float *p, int n, float m,
                           float alpha, float beta) {
    int n16 = n & ~15;
    for (int i = 0; i < n16; i += 16) {
        float16 x = vload16(0, p + i);
        float16 v = relu_mask16(vload16(0, g + i), bn_out16(x, m, alpha, beta));
        *acc += v;
        *dacc += v * (x - m);
    }
    for (int i = n16; i < n; i++) {
        float v = relu_mask(g[i], bn_out(p[i], m, alpha, beta));
        *tail += v;
        *dtail += v * (p[i] - m);
    }
}

static float bn_hsum(float16 acc, float tail) {
    float8 h8 = acc.lo + acc.hi;
    float4 h4 = h8.lo + h8.hi;
    float2 h2 = h4.lo + h4.hi;
    return h2.x + h2.y + tail;
}

/* The sum of the n floats at p, in four partial sums. */
static float bn_sum_partials(__global const float *p, int n) {
    float4 acc = 0.0f;
    int n4 = n & ~3;
    float tail = 0.0f;
    for (int i = 0; i < n4; i += 4)
        acc += vload4(0, p + i);
    for (int i = n4; i < n; i++)
        tail += p[i];
    return (acc.x + acc.y) + (acc.z + acc.w) + tail;
}

/* Chunk (g, c) of x (one work-item each, g*C + c < G*C): part[c*G + g] = its sum and
 * part[(C + c)*G + g] = the sum of squared deviations from its own mean (two passes over the
 * chunk, which stays in cache: no cancellation, however large the mean). */
__kernel void bn_stats_partial(__global float *part, __global const float *x, int N, int C, int HW,
                               int S, int G) {
    int id = get_global_id(0);
    if (id >= G * C) return;
    int g = id / C, c = id - g * C, n0 = g * S, n1 = min(n0 + S, N);
    float16 acc = 0.0f;
    float tail = 0.0f;
    for (int n = n0; n < n1; n++)
        bn_sum(&acc, &tail, x + (n * C + c) * HW, HW);
    float sum = bn_hsum(acc, tail), mean = sum / (float)((n1 - n0) * HW);
    acc = 0.0f, tail = 0.0f;
    for (int n = n0; n < n1; n++)
        bn_sum_sq(&acc, &tail, x + (n * C + c) * HW, HW, mean);
    part[c * G + g] = sum;
    part[(C + c) * G + g] = bn_hsum(acc, tail);
}

/* Chunk g's squared deviations from the batch mean: its own plus its count times the squared
 * distance of its mean from the batch's (Chan et al.'s combination of two-pass partials). */
static float bn_chunk_m2(__global const float *ps, __global const float *pm, int g, int N, int HW,
                         int S, float mean) {
    float cnt = (float)(min(S, N - g * S) * HW), d = ps[g] / cnt - mean;
    return pm[g] + cnt * d * d;
}

/* Channel c (one work-item each): the batch mean and biased variance from its chunks'
 * partials, kept as mean and 1/sqrt(var + eps); the running statistics at stats[soff + c] and
 * stats[soff + C + c] move towards the mean and the unbiased variance by `momentum`, as
 * PyTorch's. */
__kernel void bn_stats_reduce(__global float *keep, __global float *stats, int soff,
                              __global const float *part, int N, int C, int HW, int S, int G,
                              float eps, float momentum) {
    int c = get_global_id(0);
    if (c >= C) return;
    __global const float *ps = part + c * G, *pm = part + (C + c) * G;
    float M = (float)(N * HW), mean = bn_sum_partials(ps, G) / M;
    float4 acc = 0.0f;
    float tail = 0.0f;
    int g = 0;
    for (; g + 4 <= G; g += 4)
        acc += (float4)(bn_chunk_m2(ps, pm, g, N, HW, S, mean),
                        bn_chunk_m2(ps, pm, g + 1, N, HW, S, mean),
                        bn_chunk_m2(ps, pm, g + 2, N, HW, S, mean),
                        bn_chunk_m2(ps, pm, g + 3, N, HW, S, mean));
    for (; g < G; g++)
        tail += bn_chunk_m2(ps, pm, g, N, HW, S, mean);
    float m2 = (acc.x + acc.y) + (acc.z + acc.w) + tail;
    keep[c] = mean;
    keep[C + c] = 1.0f / sqrt(m2 / M + eps);
    float rm = stats[soff + c], rv = stats[soff + C + c];
    stats[soff + c] = momentum * mean + (1.0f - momentum) * rm;
    stats[soff + C + c] = momentum * (m2 / (M - 1.0f)) + (1.0f - momentum) * rv;
}

/* bn(x), then relu'd when relu != 0 (y < 0 gives 0, a NaN passes: relu_forward's rule). */
static float16 bn_act16(float16 x, float mean, float alpha, float beta, int relu) {
    float16 v = bn_out16(x, mean, alpha, beta);
    return relu ? select(v, (float16)(0.0f), v < 0.0f) : v;
}

static float8 bn_act8(float8 x, float mean, float alpha, float beta, int relu) {
    float8 v = fma(x - mean, (float8)(alpha), (float8)(beta));
    return relu ? select(v, (float8)(0.0f), v < 0.0f) : v;
}

static float4 bn_act4(float4 x, float mean, float alpha, float beta, int relu) {
    float4 v = fma(x - mean, (float4)(alpha), (float4)(beta));
    return relu ? select(v, (float4)(0.0f), v < 0.0f) : v;
}

static float bn_act(float x, float mean, float alpha, float beta, int relu) {
    float v = bn_out(x, mean, alpha, beta);
    return relu && v < 0.0f ? 0.0f : v;
}

/* y = (x - mean) * alpha + b per plane (n, c) (one work-item each, < N*C), alpha = invstd * w:
 * the batch statistics in keep, or with `running` the running ones in stats (invstd =
 * 1/sqrt(running_var + eps)). w = p[woff + c], b = p[boff + c]. Subtracting the mean first
 * keeps the precision that PyTorch CPU's x * alpha + (b - mean * alpha) loses when the mean is
 * large against the spread. With hand >= 0 the plane (H x W) goes, row by row, also into ypad,
 * the next convolution's padded input as pad_input writes it: planes of (H + 2*hand) x
 * (W + 2*hand) whose zeros are already there (the padded hand-off); with `only`, there alone
 * (nothing reads y). ypad is not touched when hand < 0. Plane (n, c) of y starts at
 * yoff + n*ysn + c*HW: ysn = C*HW for a dense y, more for a channel slice of a concatenation's
 * output (yoff its first channel). */
__kernel void bn_forward_apply(__global float *y, __global const float *x,
                               __global const float *keep, __global const float *stats, int soff,
                               __global const float *p, int woff, int boff, int N, int C, int HW,
                               int running, float eps, int relu, __global float *ypad, int hand,
                               int only, int H, int W, int yoff, int ysn) {
    int id = get_global_id(0);
    if (id >= N * C) return;
    int c = id % C;
    float mean, invstd;
    if (running)
        mean = stats[soff + c], invstd = 1.0f / sqrt(stats[soff + C + c] + eps);
    else
        mean = keep[c], invstd = keep[C + c];
    float alpha = invstd * p[woff + c], beta = p[boff + c];
    __global const float *xr = x + id * HW;
    __global float *yr = y + yoff + (long)(id / C) * ysn + (long)c * HW; /* a slice of a cat's */
    if (hand >= 0) {
        int Wq = W + 2 * hand;
        __global float *d = ypad + (long)id * (H + 2 * hand) * Wq + hand * Wq + hand;
        for (int h = 0; h < H; h++, d += Wq, xr += W, yr += W) {
            int w = 0;
            for (; w + 16 <= W; w += 16) {
                float16 v = bn_act16(vload16(0, xr + w), mean, alpha, beta, relu);
                vstore16(v, 0, d + w);
                if (!only) vstore16(v, 0, yr + w);
            }
            if (w + 8 <= W) {
                float8 v = bn_act8(vload8(0, xr + w), mean, alpha, beta, relu);
                vstore8(v, 0, d + w);
                if (!only) vstore8(v, 0, yr + w);
                w += 8;
            }
            if (w + 4 <= W) {
                float4 v = bn_act4(vload4(0, xr + w), mean, alpha, beta, relu);
                vstore4(v, 0, d + w);
                if (!only) vstore4(v, 0, yr + w);
                w += 4;
            }
            for (; w < W; w++) {
                float v = bn_act(xr[w], mean, alpha, beta, relu);
                d[w] = v;
                if (!only) yr[w] = v;
            }
        }
        return;
    }
    int n16 = HW & ~15;
    for (int i = 0; i < n16; i += 16)
        vstore16(bn_act16(vload16(0, xr + i), mean, alpha, beta, relu), 0, yr + i);
    for (int i = n16; i < HW; i++)
        yr[i] = bn_act(xr[i], mean, alpha, beta, relu);
}

/* The H x W plane src (just written: in this core's cache) into the inside of the padded plane
 * dst, (H + 2*pad) x (W + 2*pad), whose zeros are already there (the hand-offs). */
static void pad_copy(__global float *dst, __global const float *src, int H, int W, int pad) {
    int Wq = W + 2 * pad;
    dst += pad * Wq + pad;
    for (int h = 0; h < H; h++, dst += Wq, src += W) {
        int w = 0;
        for (; w + 16 <= W; w += 16) vstore16(vload16(0, src + w), 0, dst + w);
        if (w + 8 <= W) vstore8(vload8(0, src + w), 0, dst + w), w += 8;
        if (w + 4 <= W) vstore4(vload4(0, src + w), 0, dst + w), w += 4;
        for (; w < W; w++) dst[w] = src[w];
    }
}

/* Chunk (g, c) of the gradient (one work-item each, g*C + c < G*C): part[c*G + g] = the sum
 * of gy and part[(C + c)*G + g] = the sum of gy * (x - mean), mean = keep[c]; with relu, gy
 * masked by the fused ReLU (its input recomputed from x and the weight and bias in p). */
__kernel void bn_backward_partial(__global float *part, __global const float *gy,
                                  __global const float *x, __global const float *keep, int N, int C,
                                  int HW, int S, int G, __global const float *p, int woff,
                                  int boff, int relu) {
    int id = get_global_id(0);
    if (id >= G * C) return;
    int g = id / C, c = id - g * C, n0 = g * S, n1 = min(n0 + S, N);
    float mean = keep[c], alpha = keep[C + c] * p[woff + c], beta = p[boff + c];
    float16 acc = 0.0f, dacc = 0.0f;
    float tail = 0.0f, dtail = 0.0f;
    for (int n = n0; n < n1; n++) {
        int off = (n * C + c) * HW;
        if (relu) {
            bn_sums_masked(&acc, &tail, &dacc, &dtail, gy + off, x + off, HW, mean, alpha, beta);
            continue;
        }
        bn_sum(&acc, &tail, gy + off, HW);
        bn_sum_dot(&dacc, &dtail, gy + off, x + off, HW, mean);
    }
    part[c * G + g] = bn_hsum(acc, tail);
    part[(C + c) * G + g] = bn_hsum(dacc, dtail);
}

/* Channel c (one work-item each): the bias gradient gb = sum gy and the weight gradient
 * gw = invstd * sum gy * (x - mean) = sum gy * xhat, written (not added) at grads[boff + c] and
 * grads[woff + c]; and, from coef + coff, the coefficients of the input gradient
 * gx = coef[c] * (gy - coef[C + c] - (x - mean) * coef[2C + c]): w * invstd, gb / M and
 * gw * invstd / M (M = N*HW, PyTorch's backward rearranged). */
__kernel void bn_backward_reduce(__global float *grads, int woff, int boff, __global float *coef,
                                 int coff, __global const float *part, __global const float *keep,
                                 __global const float *p, int N, int C, int HW, int G) {
    int c = get_global_id(0);
    if (c >= C) return;
    coef += coff;
    float M = (float)(N * HW), invstd = keep[C + c];
    float gb = bn_sum_partials(part + c * G, G);
    float gw = bn_sum_partials(part + (C + c) * G, G) * invstd;
    grads[woff + c] = gw;
    grads[boff + c] = gb;
    coef[c] = p[woff + c] * invstd;
    coef[C + c] = gb / M;
    coef[2 * C + c] = gw * invstd / M;
}

/* gx per plane (n, c) (one work-item each, < N*C) from the coefficients of
 * bn_backward_reduce; with relu, gy masked as in bn_backward_partial. With hand >= 0 the plane
 * (H x W) goes also into gpad, the previous convolution's output gradient padded for its
 * input-gradient convolution (planes of (H + 2*hand) x (W + 2*hand) whose zeros are already
 * there: the backward's hand-off), and with `only` there alone, row by row (that convolution
 * reads no other copy); gpad is not touched when hand < 0. Every width computes the same
 * expression (BN_GX), so each element is the same float whichever path writes it. */
#define BN_GX(T, g, xv)                                                                            \
    (a * ((relu ? select(g, (T)(0.0f), fma(xv - mean, (T)(alpha), (T)(beta)) <= 0.0f) : g) - gm - \
          (xv - mean) * k))
__kernel void bn_backward_apply(__global float *gx, __global const float *gy,
                                __global const float *x, __global const float *keep,
                                __global const float *coef, int coff, int N, int C, int HW,
                                __global const float *p, int woff, int boff, int relu,
                                __global float *gpad, int hand, int only, int H, int W) {
    int id = get_global_id(0);
    if (id >= N * C) return;
    coef += coff;
    int c = id % C;
    float mean = keep[c], a = coef[c], gm = coef[C + c], k = coef[2 * C + c];
    float alpha = relu ? keep[C + c] * p[woff + c] : 0.0f, beta = relu ? p[boff + c] : 0.0f;
    __global const float *gr = gy + id * HW, *xr = x + id * HW;
    if (hand >= 0 && only) {
        int Wq = W + 2 * hand;
        __global float *d = gpad + (long)id * (H + 2 * hand) * Wq + hand * Wq + hand;
        for (int h = 0; h < H; h++, d += Wq, gr += W, xr += W) {
            int w = 0;
            for (; w + 16 <= W; w += 16)
                vstore16(BN_GX(float16, vload16(0, gr + w), vload16(0, xr + w)), 0, d + w);
            if (w + 8 <= W)
                vstore8(BN_GX(float8, vload8(0, gr + w), vload8(0, xr + w)), 0, d + w), w += 8;
            if (w + 4 <= W)
                vstore4(BN_GX(float4, vload4(0, gr + w), vload4(0, xr + w)), 0, d + w), w += 4;
            for (; w < W; w++) d[w] = BN_GX(float, gr[w], xr[w]);
        }
        return;
    }
    __global float *out = gx + id * HW;
    int n16 = HW & ~15;
    for (int i = 0; i < n16; i += 16)
        vstore16(BN_GX(float16, vload16(0, gr + i), vload16(0, xr + i)), 0, out + i);
    for (int i = n16; i < HW; i++)
        out[i] = BN_GX(float, gr[i], xr[i]);
    if (hand >= 0) pad_copy(gpad + (long)id * (H + 2 * hand) * (W + 2 * hand), out, H, W, hand);
}
