/* GEMM dispatch: CLBlast or clcnn's portable OpenCL kernels, chosen per context. */
#include "gemm.h"

#include <stdlib.h>
#include <string.h>

#include <clblast_c.h>

#ifndef CLCNN_CLBLAST_VERSION
#define CLCNN_CLBLAST_VERSION "unknown"
#endif

const char *clcnn_blas_version(void) {
    return CLCNN_CLBLAST_VERSION;
}

const char *clcnn_gemm_backend_name(clcnn_gemm_backend b) {
    return b == CLCNN_GEMM_CLBLAST ? "clblast" : "opencl";
}

clcnn_status clcnn_gemm_init(clcnn_context *ctx) {
    const char *env = getenv("CLCNN_BACKEND");
    if (env && *env) {
        if (!strcmp(env, "clblast")) ctx->gemm_backend = CLCNN_GEMM_CLBLAST;
        else if (!strcmp(env, "opencl")) ctx->gemm_backend = CLCNN_GEMM_OPENCL;
        else
            return clcnn_fail(&ctx->err, CLCNN_ERR_INVALID_ARGUMENT,
                              "CLCNN_BACKEND='%s' is not a backend (clblast, opencl)", env);
    } else {
        /* CLBlast's kernels are shaped for GPUs and run at a fraction of the portable kernels'
     * speed on CPU devices (docs/PERFORMANCE.md); GPUs get CLBlast. */
        ctx->gemm_backend =
            ctx->info.type == CLCNN_DEVICE_GPU ? CLCNN_GEMM_CLBLAST : CLCNN_GEMM_OPENCL;
    }
    static const char *names[4] = {"gemm_nn", "gemm_nt", "gemm_tn", "gemm_tt"};
    for (int i = 0; i < 4; i++)
        if (!(ctx->gemm_kerns[i] = clcnn_ctx_kernel(ctx, names[i])))
            return clcnn_fail(&ctx->err, CLCNN_ERR_BUILD, "kernel %s is missing", names[i]);
    return CLCNN_SUCCESS;
}

static clcnn_status gemm_clblast(clcnn_context *ctx, int ta, int tb, int M, int N, int K,
                                 float alpha, cl_mem A, size_t a_off, int lda, cl_mem B,
                                 size_t b_off, int ldb, float beta, cl_mem C, size_t c_off,
                                 int ldc) {
    CLBlastStatusCode rc = CLBlastSgemm(
        CLBlastLayoutRowMajor, ta ? CLBlastTransposeYes : CLBlastTransposeNo,
        tb ? CLBlastTransposeYes : CLBlastTransposeNo, (size_t)M, (size_t)N, (size_t)K, alpha, A,
        a_off, (size_t)lda, B, b_off, (size_t)ldb, beta, C, c_off, (size_t)ldc, &ctx->queue, NULL);
    if (rc != CLBlastSuccess) {
        if ((int)rc < 0 && (int)rc > -100)
            return clcnn_fail(&ctx->err, (clcnn_status)rc, "CLBlastSgemm(%d,%d,%d) failed: %s", M,
                              N, K, clcnn_cl_error_name((int)rc));
        return clcnn_fail(&ctx->err, CLCNN_ERR_BLAS, "CLBlastSgemm(%d,%d,%d) failed: status %d",
                          M, N, K, (int)rc);
    }
    return CLCNN_SUCCESS;
}

static clcnn_status gemm_opencl(clcnn_context *ctx, int ta, int tb, int M, int N, int K,
                                float alpha, cl_mem A, size_t a_off, int lda, cl_mem B,
                                size_t b_off, int ldb, float beta, cl_mem C, size_t c_off,
                                int ldc) {
    clcnn_kern *k = ctx->gemm_kerns[(ta ? 2 : 0) + (tb ? 1 : 0)];
    int ao = (int)a_off, bo = (int)b_off, co = (int)c_off;
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    size_t global[2] = {(size_t)(N + 3) / 4, (size_t)(M + 3) / 4};
    CLCNN_ARG(&a, M);
    CLCNN_ARG(&a, N);
    CLCNN_ARG(&a, K);
    CLCNN_ARG(&a, alpha);
    CLCNN_ARG(&a, A);
    CLCNN_ARG(&a, ao);
    CLCNN_ARG(&a, lda);
    CLCNN_ARG(&a, B);
    CLCNN_ARG(&a, bo);
    CLCNN_ARG(&a, ldb);
    CLCNN_ARG(&a, beta);
    CLCNN_ARG(&a, C);
    CLCNN_ARG(&a, co);
    CLCNN_ARG(&a, ldc);
    return clcnn_launch_nd(ctx, k, &a, 2, global);
}

clcnn_status clcnn_gemm(clcnn_context *ctx, int trans_a, int trans_b, int M, int N, int K,
                        float alpha, cl_mem A, size_t a_off, int lda, cl_mem B, size_t b_off,
                        int ldb, float beta, cl_mem C, size_t c_off, int ldc) {
    if (M <= 0 || N <= 0) return CLCNN_SUCCESS;
    if (ctx->gemm_backend == CLCNN_GEMM_CLBLAST)
        return gemm_clblast(ctx, trans_a, trans_b, M, N, K, alpha, A, a_off, lda, B, b_off, ldb,
                            beta, C, c_off, ldc);
    return gemm_opencl(ctx, trans_a, trans_b, M, N, K, alpha, A, a_off, lda, B, b_off, ldb, beta,
                       C, c_off, ldc);
}
