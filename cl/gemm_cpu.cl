/* GEMM shaped for CPU OpenCL devices (PoCL): row-major C = alpha*op(A)*B + beta*C with B read
 * along its rows. One work-item per work-group owns an 8 x 32 tile of C in sixteen float16
 * accumulators; the k loop is innermost, each B row segment is two vload16s and each A value
 * is broadcast into an explicit fma, which LLVM turns into one 512-bit FMA per accumulator
 * (../shared/PERFORMANCE.md: 80-97% of peak for this shape of kernel). Dimension 0 walks the
 * rows so that consecutive work-groups reuse the same panel of B from cache. Tiles that cross
 * the matrix edge take a scalar path, so every shape is handled. Transposed B is handled by
 * the host (gemm.c transposes it into a scratch buffer first). */

#define TM 8
#define TN 32

#define ROW_FMA(r)                                                                                 \
    {                                                                                              \
        float16 av = (float16)(AGET(i0 + r, k));                                                   \
        c##r##a = fma(av, b0, c##r##a);                                                            \
        c##r##b = fma(av, b1, c##r##b);                                                            \
    }

#define ROW_STORE(r)                                                                               \
    {                                                                                              \
        __global float *cp = C + coff + (i0 + r) * ldc + j0;                                       \
        if (beta == 0.0f) {                                                                        \
            vstore16(alpha * c##r##a, 0, cp);                                                      \
            vstore16(alpha * c##r##b, 0, cp + 16);                                                 \
        } else {                                                                                   \
            vstore16(alpha * c##r##a + beta * vload16(0, cp), 0, cp);                              \
            vstore16(alpha * c##r##b + beta * vload16(0, cp + 16), 0, cp + 16);                    \
        }                                                                                          \
    }

/* Split-K: work-items with get_global_id(2) = s cover k in [s*kc, min(K, (s+1)*kc)) and write
 * C + s*cstride (a partial product, reduced by gemm_reduce). Without a split, kc = K and the
 * third dimension is 1. Consecutive work-groups share one kc x 32 panel of B, which then
 * stays in cache: the weight gradients (K = every pixel of the batch) need this. */
#define GEMM_CPU_KERNEL(NAME)                                                                      \
    __kernel __attribute__((reqd_work_group_size(1, 1, 1))) void NAME(                             \
        int M, int N, int Ktot, float alpha, __global const float *A, int aoff, int lda,           \
        __global const float *B, int boff, int ldb, float beta, __global float *C, int coff,       \
        int ldc, int kc, int cstride) {                                                            \
        int i0 = get_global_id(0) * TM;                                                            \
        int j0 = get_global_id(1) * TN;                                                            \
        int ks = get_global_id(2) * kc;                                                            \
        int K = min(Ktot - ks, kc);                                                                \
        if (i0 >= M || j0 >= N) return;                                                            \
        coff += get_global_id(2) * cstride;                                                        \
        if (i0 + TM <= M && j0 + TN <= N) {                                                        \
            float16 c0a = 0, c0b = 0, c1a = 0, c1b = 0, c2a = 0, c2b = 0, c3a = 0, c3b = 0;        \
            float16 c4a = 0, c4b = 0, c5a = 0, c5b = 0, c6a = 0, c6b = 0, c7a = 0, c7b = 0;        \
            __global const float *bp = B + boff + ks * ldb + j0;                                   \
            for (int k = 0; k < K; k++, bp += ldb) {                                               \
                float16 b0 = vload16(0, bp), b1 = vload16(0, bp + 16);                             \
                ROW_FMA(0) ROW_FMA(1) ROW_FMA(2) ROW_FMA(3)                                        \
                ROW_FMA(4) ROW_FMA(5) ROW_FMA(6) ROW_FMA(7)                                        \
            }                                                                                      \
            ROW_STORE(0) ROW_STORE(1) ROW_STORE(2) ROW_STORE(3)                                    \
            ROW_STORE(4) ROW_STORE(5) ROW_STORE(6) ROW_STORE(7)                                    \
            return;                                                                                \
        }                                                                                          \
        /* Edge tile: plain loops over the part inside the matrix. */                              \
        int im = min(TM, M - i0), jn = min(TN, N - j0);                                            \
        for (int r = 0; r < im; r++) {                                                             \
            for (int c = 0; c < jn; c++) {                                                         \
                float acc = 0.0f;                                                                  \
                for (int k = 0; k < K; k++)                                                        \
                    acc = fma(AGET(i0 + r, k), B[boff + (k + ks) * ldb + j0 + c], acc);            \
                __global float *cp = C + coff + (i0 + r) * ldc + j0 + c;                           \
                *cp = beta == 0.0f ? alpha * acc : alpha * acc + beta * *cp;                       \
            }                                                                                      \
        }                                                                                          \
    }

#define AGET(i, k) A[aoff + (i) * lda + (k) + ks]
GEMM_CPU_KERNEL(gemm_cpu_nn)
#undef AGET
#define AGET(i, k) A[aoff + ((k) + ks) * lda + (i)]
GEMM_CPU_KERNEL(gemm_cpu_tn)
#undef AGET

/* C[i*ldc + j] = alpha * sum over s < S of P[s*M*N + i*N + j] + beta * C[i*ldc + j] */
__kernel void gemm_reduce(__global float *C, int coff, int ldc, __global const float *P, int M,
                          int N, int S, float alpha, float beta) {
    int t = get_global_id(0);
    if (t >= M * N) return;
    float acc = 0.0f;
    for (int s = 0; s < S; s++) acc += P[s * M * N + t];
    __global float *c = C + coff + (t / N) * ldc + t % N;
    *c = beta == 0.0f ? alpha * acc : alpha * acc + beta * *c;
}

/* out (cols x rows, dense) = in^T, in being rows x cols with leading dimension ld: what the
 * kernels above need for a transposed B. One work-item per 16 x 16 block: sixteen row loads,
 * sixteen column stores through a private tile (one work-item per element was ~30
 * instructions per element, with two divisions). global = (ceil(cols/16), ceil(rows/16)). */
__kernel void transpose_f32(__global float *out, __global const float *in, int ioff, int ld,
                            int rows, int cols) {
    int c0 = get_global_id(0) * 16, r0 = get_global_id(1) * 16;
    if (c0 >= cols || r0 >= rows) return;
    __global const float *src = in + ioff + (long)r0 * ld + c0;
    if (c0 + 16 <= cols && r0 + 16 <= rows) {
        float t[16][16];
        for (int i = 0; i < 16; i++) vstore16(vload16(0, src + (long)i * ld), 0, t[i]);
        for (int j = 0; j < 16; j++) {
            float16 v = (float16)(t[0][j], t[1][j], t[2][j], t[3][j], t[4][j], t[5][j], t[6][j],
                                  t[7][j], t[8][j], t[9][j], t[10][j], t[11][j], t[12][j],
                                  t[13][j], t[14][j], t[15][j]);
            vstore16(v, 0, out + (long)(c0 + j) * rows + r0);
        }
        return;
    }
    int nr = min(16, rows - r0), nc = min(16, cols - c0);
    for (int j = 0; j < nc; j++)
        for (int i = 0; i < nr; i++) out[(long)(c0 + j) * rows + r0 + i] = src[(long)i * ld + j];
}
