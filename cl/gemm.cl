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
