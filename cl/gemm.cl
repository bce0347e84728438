/* Portable GEMM for the "opencl" backend: row-major C = alpha*op(A)*op(B) + beta*C.
 * Each work-item owns a 4x4 block of C held in registers; edges are guarded so every shape
 * works. Four variants (NN, NT, TN, TT) are stamped out by a macro so the inner loop has no
 * run-time branch on the transpose flags. Device-shaped kernels are a later backend. */

#define A_NN(i, k) A[aoff + (i) * lda + (k)]
#define A_T_(i, k) A[aoff + (k) * lda + (i)]
#define B_NN(k, j) B[boff + (k) * ldb + (j)]
#define B_T_(k, j) B[boff + (j) * ldb + (k)]

#define GEMM_KERNEL(NAME, AGET, BGET)                                                             \
    __kernel void NAME(int M, int N, int K, float alpha, __global const float *A, int aoff,       \
                       int lda, __global const float *B, int boff, int ldb, float beta,            \
                       __global float *C, int coff, int ldc) {                                    \
        int j0 = get_global_id(0) * 4;                                                             \
        int i0 = get_global_id(1) * 4;                                                             \
        if (i0 >= M || j0 >= N) return;                                                            \
        float acc[4][4];                                                                           \
        for (int r = 0; r < 4; r++)                                                                \
            for (int c = 0; c < 4; c++) acc[r][c] = 0.0f;                                          \
        if (i0 + 4 <= M && j0 + 4 <= N) {                                                          \
            for (int k = 0; k < K; k++) {                                                          \
                float a[4], b[4];                                                                  \
                for (int r = 0; r < 4; r++) a[r] = AGET(i0 + r, k);                                \
                for (int c = 0; c < 4; c++) b[c] = BGET(k, j0 + c);                                \
                for (int r = 0; r < 4; r++)                                                        \
                    for (int c = 0; c < 4; c++) acc[r][c] = fma(a[r], b[c], acc[r][c]);            \
            }                                                                                      \
        } else {                                                                                   \
            for (int k = 0; k < K; k++) {                                                          \
                float a[4], b[4];                                                                  \
                for (int r = 0; r < 4; r++) a[r] = i0 + r < M ? AGET(i0 + r, k) : 0.0f;            \
                for (int c = 0; c < 4; c++) b[c] = j0 + c < N ? BGET(k, j0 + c) : 0.0f;            \
                for (int r = 0; r < 4; r++)                                                        \
                    for (int c = 0; c < 4; c++) acc[r][c] = fma(a[r], b[c], acc[r][c]);            \
            }                                                                                      \
        }                                                                                          \
        for (int r = 0; r < 4; r++) {                                                              \
            if (i0 + r >= M) break;                                                                \
            for (int c = 0; c < 4; c++) {                                                          \
                if (j0 + c >= N) break;                                                            \
                __global float *p = &C[coff + (i0 + r) * ldc + j0 + c];                            \
                /* beta == 0 must not read C: it may hold garbage (NaN) as in BLAS */              \
                *p = beta == 0.0f ? alpha * acc[r][c] : alpha * acc[r][c] + beta * *p;             \
            }                                                                                      \
        }                                                                                          \
    }

GEMM_KERNEL(gemm_nn, A_NN, B_NN)
GEMM_KERNEL(gemm_nt, A_NN, B_T_)
GEMM_KERNEL(gemm_tn, A_T_, B_NN)
GEMM_KERNEL(gemm_tt, A_T_, B_T_)

/* GPU-shaped GEMM ("gpu" backend): a work-group of 16 x 16 work-items computes a 64 x 64 tile
 * of C, each work-item a 4 x 4 block in registers (rows i0 + 16*r, columns j0 + 16*c, so that
 * neighbouring work-items touch neighbouring addresses). The K dimension goes in steps of 16:
 * the group stages a 64 x 16 panel of op(A) and a 16 x 64 panel of op(B) in local memory,
 * each work-item loading four elements of each (zero past the edges), then every work-item
 * runs 16 rank-1 updates from local memory. Every shape works: loads and stores are guarded.
 * global = (ceil(N/64)*16, ceil(M/64)*16), local = (16, 16). */
#define GT_TILE 64
#define GT_K 16
#define GEMM_TILED(NAME, AGET, BGET)                                                              \
    __kernel __attribute__((reqd_work_group_size(16, 16, 1))) void NAME(                           \
        int M, int N, int K, float alpha, __global const float *A, int aoff, int lda,              \
        __global const float *B, int boff, int ldb, float beta, __global float *C, int coff,       \
        int ldc) {                                                                                 \
        __local float As[GT_K][GT_TILE + 1], Bs[GT_K][GT_TILE + 1];                               \
        int tx = get_local_id(0), ty = get_local_id(1), t = ty * 16 + tx;                          \
        int bi = get_group_id(1) * GT_TILE, bj = get_group_id(0) * GT_TILE;                        \
        float acc[4][4];                                                                           \
        for (int r = 0; r < 4; r++)                                                                \
            for (int c = 0; c < 4; c++) acc[r][c] = 0.0f;                                          \
        for (int k0 = 0; k0 < K; k0 += GT_K) {                                                     \
            /* 256 work-items stage 64 x 16 of each operand: four elements each */                \
            for (int l = 0; l < 4; l++) {                                                          \
                int e = t + 256 * l, kk = e % GT_K, ii = e / GT_K;                                 \
                int gi = bi + ii, gk = k0 + kk;                                                    \
                As[kk][ii] = gi < M && gk < K ? AGET(gi, gk) : 0.0f;                               \
                int jj = e % GT_TILE, kb = e / GT_TILE, gj = bj + jj, gkb = k0 + kb;               \
                Bs[kb][jj] = gkb < K && gj < N ? BGET(gkb, gj) : 0.0f;                             \
            }                                                                                      \
            barrier(CLK_LOCAL_MEM_FENCE);                                                          \
            for (int kk = 0; kk < GT_K; kk++) {                                                    \
                float a[4], b[4];                                                                  \
                for (int r = 0; r < 4; r++) a[r] = As[kk][ty + 16 * r];                            \
                for (int c = 0; c < 4; c++) b[c] = Bs[kk][tx + 16 * c];                            \
                for (int r = 0; r < 4; r++)                                                        \
                    for (int c = 0; c < 4; c++) acc[r][c] = fma(a[r], b[c], acc[r][c]);            \
            }                                                                                      \
            barrier(CLK_LOCAL_MEM_FENCE);                                                          \
        }                                                                                          \
        for (int r = 0; r < 4; r++) {                                                              \
            int i = bi + ty + 16 * r;                                                              \
            if (i >= M) break;                                                                     \
            for (int c = 0; c < 4; c++) {                                                          \
                int j = bj + tx + 16 * c;                                                          \
                if (j >= N) continue;                                                              \
                __global float *p = &C[coff + i * ldc + j];                                        \
                *p = beta == 0.0f ? alpha * acc[r][c] : alpha * acc[r][c] + beta * *p;             \
            }                                                                                      \
        }                                                                                          \
    }

GEMM_TILED(gemm_tiled_nn, A_NN, B_NN)
GEMM_TILED(gemm_tiled_nt, A_NN, B_T_)
GEMM_TILED(gemm_tiled_tn, A_T_, B_NN)
GEMM_TILED(gemm_tiled_tt, A_T_, B_T_)
