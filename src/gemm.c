/* GEMM dispatch: CLBlast or clcnn's portable OpenCL kernels, chosen per context. */
#include "gemm.h"

#include <stdlib.h>
#include <string.h>

#include <clblast_c.h>

#include "tune.h"

#ifndef CLCNN_CLBLAST_VERSION
#define CLCNN_CLBLAST_VERSION "unknown"
#endif

const char *clcnn_blas_version(void) {
    return CLCNN_CLBLAST_VERSION;
}

const char *clcnn_gemm_backend_name(clcnn_gemm_backend b) {
    return b == CLCNN_GEMM_CLBLAST ? "clblast"
           : b == CLCNN_GEMM_CPU   ? "cpu"
           : b == CLCNN_GEMM_GPU   ? "gpu"
                                   : "opencl";
}

clcnn_status clcnn_gemm_init(clcnn_context *ctx) {
    const char *env = getenv("CLCNN_BACKEND");
    ctx->gemm_forced = env && *env;
    if (env && *env) {
        if (!strcmp(env, "clblast"))
            ctx->gemm_backend = CLCNN_GEMM_CLBLAST;
        else if (!strcmp(env, "opencl"))
            ctx->gemm_backend = CLCNN_GEMM_OPENCL;
        else if (!strcmp(env, "cpu"))
            ctx->gemm_backend = CLCNN_GEMM_CPU;
        else if (!strcmp(env, "gpu"))
            ctx->gemm_backend = CLCNN_GEMM_GPU;
        else
            return clcnn_fail(&ctx->err, CLCNN_ERR_INVALID_ARGUMENT,
                              "CLCNN_BACKEND='%.40s' is not a backend (clblast, opencl, gpu, cpu)",
                              env);
    } else {
        /* CLBlast's kernels are shaped for GPUs and run at a fraction of the portable kernels'
         * speed on CPU devices (docs/PERFORMANCE.md); GPUs get CLBlast. */
        ctx->gemm_backend =
            ctx->info.type == CLCNN_DEVICE_CPU ? CLCNN_GEMM_CPU : CLCNN_GEMM_CLBLAST;
    }
    static const char *names[4] = {"gemm_nn", "gemm_nt", "gemm_tn", "gemm_tt"};
    for (int i = 0; i < 4; i++)
        if (!(ctx->gemm_kerns[i] = clcnn_ctx_kernel(ctx, names[i])))
            return clcnn_fail(&ctx->err, CLCNN_ERR_BUILD, "kernel %s is missing", names[i]);
    ctx->gemm_cpu[0] = clcnn_ctx_kernel(ctx, "gemm_cpu_nn");
    ctx->gemm_cpu[1] = clcnn_ctx_kernel(ctx, "gemm_cpu_tn");
    ctx->transpose = clcnn_ctx_kernel(ctx, "transpose_f32");
    ctx->gemm_reduce = clcnn_ctx_kernel(ctx, "gemm_reduce");
    if (!ctx->gemm_cpu[0] || !ctx->gemm_cpu[1] || !ctx->transpose || !ctx->gemm_reduce)
        return clcnn_fail(&ctx->err, CLCNN_ERR_BUILD, "CPU GEMM kernels are missing");
    /* The tiled kernels need 16x16 work-groups and 8.3 KB of local memory: asked of the
     * kernel and the device, not assumed. */
    static const char *tiled[4] = {"gemm_tiled_nn", "gemm_tiled_nt", "gemm_tiled_tn",
                                   "gemm_tiled_tt"};
    int tiled_ok = 1;
    for (int i = 0; i < 4; i++) {
        clcnn_kern *k = clcnn_ctx_kernel(ctx, tiled[i]);
        cl_ulong local = 0;
        size_t wg = 0;
        if (!k ||
            clGetKernelWorkGroupInfo(k->k, ctx->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg,
                                     NULL) != CL_SUCCESS ||
            clGetDeviceInfo(ctx->device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local, &local, NULL) !=
                CL_SUCCESS ||
            wg < 256 || local < 2 * 16 * 65 * sizeof(float))
            tiled_ok = 0;
        ctx->gemm_tiled[i] = k;
    }
    if (!tiled_ok) memset(ctx->gemm_tiled, 0, sizeof ctx->gemm_tiled);
    if (ctx->gemm_backend == CLCNN_GEMM_GPU && !tiled_ok)
        return clcnn_fail(&ctx->err, CLCNN_ERR_UNSUPPORTED,
                          "CLCNN_BACKEND=gpu: this device cannot run 16x16 work-groups with "
                          "8.3 KB of local memory");
    return CLCNN_SUCCESS;
}

static clcnn_status gemm_clblast(clcnn_context *ctx, int ta, int tb, int M, int N, int K,
                                 float alpha, cl_mem A, size_t a_off, int lda, cl_mem B,
                                 size_t b_off, int ldb, float beta, cl_mem C, size_t c_off,
                                 int ldc) {
    CLBlastStatusCode rc =
        CLBlastSgemm(CLBlastLayoutRowMajor, ta ? CLBlastTransposeYes : CLBlastTransposeNo,
                     tb ? CLBlastTransposeYes : CLBlastTransposeNo, (size_t)M, (size_t)N, (size_t)K,
                     alpha, A, a_off, (size_t)lda, B, b_off, (size_t)ldb, beta, C, c_off,
                     (size_t)ldc, &ctx->queue, clcnn_prof_slot(ctx, "CLBlastSgemm"));
    if (rc != CLBlastSuccess) {
        if ((int)rc < 0 && (int)rc > -100)
            return clcnn_fail(&ctx->err, (clcnn_status)rc, "CLBlastSgemm(%d,%d,%d) failed: %s", M,
                              N, K, clcnn_cl_error_name((int)rc));
        return clcnn_fail(&ctx->err, CLCNN_ERR_BLAS, "CLBlastSgemm(%d,%d,%d) failed: status %d", M,
                          N, K, (int)rc);
    }
    return CLCNN_SUCCESS;
}

/* The portable kernels (gemm_*: 4x4 blocks, the driver's group size) and the GPU-shaped ones
 * (gemm_tiled_*: 64x64 tiles per 16x16 group) take the same arguments. */
static clcnn_status gemm_opencl(clcnn_context *ctx, int tiled, int ta, int tb, int M, int N, int K,
                                float alpha, cl_mem A, size_t a_off, int lda, cl_mem B,
                                size_t b_off, int ldb, float beta, cl_mem C, size_t c_off,
                                int ldc) {
    int v = (ta ? 2 : 0) + (tb ? 1 : 0);
    clcnn_kern *k = tiled ? ctx->gemm_tiled[v] : ctx->gemm_kerns[v];
    int ao = (int)a_off, bo = (int)b_off, co = (int)c_off;
    clcnn_args a = {k->k, 0, CL_SUCCESS};
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
    if (!tiled) {
        size_t global[2] = {(size_t)(N + 3) / 4, (size_t)(M + 3) / 4};
        return clcnn_launch_nd(ctx, k, &a, 2, global);
    }
    size_t global[2] = {(size_t)(N + 63) / 64 * 16, (size_t)(M + 63) / 64 * 16};
    size_t local[2] = {16, 16};
    if (a.rc != CL_SUCCESS) return clcnn_cl_fail(ctx, a.rc, k->name);
    cl_int rc = clEnqueueNDRangeKernel(ctx->queue, k->k, 2, NULL, global, local, 0, NULL,
                                       clcnn_prof_slot(ctx, k->name));
    if (rc != CL_SUCCESS) return clcnn_cl_fail(ctx, rc, k->name);
    return CLCNN_SUCCESS;
}

/* Grows one of the context's scratch buffers to hold `need` floats. */
static clcnn_status scratch(clcnn_context *ctx, cl_mem *buf, size_t *cap, size_t need,
                            const char *what) {
    cl_int rc;
    if (need <= *cap) return CLCNN_SUCCESS;
    if (need > (size_t)CLCNN_MAX_ELEMENTS)
        return clcnn_fail(&ctx->err, CLCNN_ERR_SHAPE,
                          "%s: %zu elements, more than the %lld that clcnn's 32-bit kernel "
                          "indices reach; use a smaller batch",
                          what, need, (long long)CLCNN_MAX_ELEMENTS);
    if (*buf) clReleaseMemObject(*buf);
    *cap = 0;
    *buf = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE, need * sizeof(float), NULL, &rc);
    if (rc != CL_SUCCESS) {
        *buf = NULL;
        return clcnn_cl_fail(ctx, rc, what);
    }
    *cap = need;
    return CLCNN_SUCCESS;
}

/* Writes op(B) = B^T (B stored as N rows of K, leading dimension ldb) densely into the
 * context's scratch buffer as K rows of N. */
static clcnn_status transpose_b(clcnn_context *ctx, int N, int K, cl_mem B, size_t b_off, int ldb) {
    size_t need = (size_t)N * (size_t)K;
    clcnn_status st = scratch(ctx, &ctx->gemm_scratch, &ctx->gemm_scratch_cap, need,
                              "allocating the GEMM transpose scratch");
    if (st) return st;
    clcnn_kern *k = ctx->transpose;
    int bo = (int)b_off;
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, ctx->gemm_scratch);
    CLCNN_ARG(&a, B);
    CLCNN_ARG(&a, bo);
    CLCNN_ARG(&a, ldb);
    CLCNN_ARG(&a, N);
    CLCNN_ARG(&a, K);
    size_t global[2] = {(size_t)(K + 15) / 16, (size_t)(N + 15) / 16};
    return clcnn_launch_nd(ctx, k, &a, 2, global);
}

static clcnn_status gemm_cpu(clcnn_context *ctx, int ta, int tb, int M, int N, int K, float alpha,
                             cl_mem A, size_t a_off, int lda, cl_mem B, size_t b_off, int ldb,
                             float beta, cl_mem C, size_t c_off, int ldc) {
    clcnn_status st = CLCNN_SUCCESS;
    if (tb) {
        if ((st = transpose_b(ctx, N, K, B, b_off, ldb))) return st;
        B = ctx->gemm_scratch, b_off = 0, ldb = N;
    }
    /* Few output tiles over a long K (weight gradients: K = every pixel of the batch) would
     * stream B from memory once per row tile; splitting K into cache-sized chunks lets the
     * row tiles share each chunk, and a second pass adds the partial products. */
    int tiles = ((M + 7) / 8) * ((N + 31) / 32), kc = K, S = 1;
    if (K >= 4096 && tiles < 512) {
        kc = 512;
        S = (K + kc - 1) / kc;
        st = scratch(ctx, &ctx->gemm_partial, &ctx->gemm_partial_cap, (size_t)S * M * N,
                     "allocating the split-K scratch");
        if (st) return st;
    }
    clcnn_kern *k = ctx->gemm_cpu[ta ? 1 : 0];
    int ao = (int)a_off, bo = (int)b_off, co = S > 1 ? 0 : (int)c_off, ldcc = S > 1 ? N : ldc;
    int cstride = M * N;
    float al = S > 1 ? 1.0f : alpha, be = S > 1 ? 0.0f : beta;
    cl_mem Cout = S > 1 ? ctx->gemm_partial : C;
    size_t global[3] = {(size_t)(M + 7) / 8, (size_t)(N + 31) / 32, (size_t)S};
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, M);
    CLCNN_ARG(&a, N);
    CLCNN_ARG(&a, K);
    CLCNN_ARG(&a, al);
    CLCNN_ARG(&a, A);
    CLCNN_ARG(&a, ao);
    CLCNN_ARG(&a, lda);
    CLCNN_ARG(&a, B);
    CLCNN_ARG(&a, bo);
    CLCNN_ARG(&a, ldb);
    CLCNN_ARG(&a, be);
    CLCNN_ARG(&a, Cout);
    CLCNN_ARG(&a, co);
    CLCNN_ARG(&a, ldcc);
    CLCNN_ARG(&a, kc);
    CLCNN_ARG(&a, cstride);
    st = clcnn_launch_single(ctx, k, &a, 3, global);
    if (st || S == 1) return st;
    clcnn_kern *r = ctx->gemm_reduce;
    int c_o = (int)c_off;
    clcnn_args b = {r->k, 0, CL_SUCCESS};
    CLCNN_ARG(&b, C);
    CLCNN_ARG(&b, c_o);
    CLCNN_ARG(&b, ldc);
    CLCNN_ARG(&b, ctx->gemm_partial);
    CLCNN_ARG(&b, M);
    CLCNN_ARG(&b, N);
    CLCNN_ARG(&b, S);
    CLCNN_ARG(&b, alpha);
    CLCNN_ARG(&b, beta);
    return clcnn_launch1d(ctx, r, &b, (size_t)M * N);
}

static clcnn_status gemm_on(clcnn_context *ctx, int backend, int trans_a, int trans_b, int M, int N,
                            int K, float alpha, cl_mem A, size_t a_off, int lda, cl_mem B,
                            size_t b_off, int ldb, float beta, cl_mem C, size_t c_off, int ldc) {
    if (backend == CLCNN_GEMM_CLBLAST)
        return gemm_clblast(ctx, trans_a, trans_b, M, N, K, alpha, A, a_off, lda, B, b_off, ldb,
                            beta, C, c_off, ldc);
    if (backend == CLCNN_GEMM_CPU)
        return gemm_cpu(ctx, trans_a, trans_b, M, N, K, alpha, A, a_off, lda, B, b_off, ldb, beta,
                        C, c_off, ldc);
    return gemm_opencl(ctx, backend == CLCNN_GEMM_GPU, trans_a, trans_b, M, N, K, alpha, A, a_off,
                       lda, B, b_off, ldb, beta, C, c_off, ldc);
}

/* A GEMM call being tuned: the candidates write into a scratch C of the same shape, so the
 * real C (which beta may read) is written once, by the winner. */
typedef struct gemm_tuning {
    const int *backends;
    int ta, tb, M, N, K, lda, ldb, ldc;
    float alpha, beta;
    cl_mem A, B, scratch;
    size_t a_off, b_off;
} gemm_tuning;

static clcnn_status gemm_tune_run(clcnn_context *ctx, int c, void *arg) {
    gemm_tuning *t = arg;
    cl_int rc = CL_SUCCESS;
    if (!t->scratch) {
        t->scratch = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE,
                                    (size_t)t->M * (size_t)t->ldc * sizeof(float), NULL, &rc);
        if (rc != CL_SUCCESS) return clcnn_cl_fail(ctx, rc, "autotuning scratch");
    }
    return gemm_on(ctx, t->backends[c], t->ta, t->tb, t->M, t->N, t->K, t->alpha, t->A, t->a_off,
                   t->lda, t->B, t->b_off, t->ldb, t->beta, t->scratch, 0, t->ldc);
}

clcnn_status clcnn_gemm(clcnn_context *ctx, int trans_a, int trans_b, int M, int N, int K,
                        float alpha, cl_mem A, size_t a_off, int lda, cl_mem B, size_t b_off,
                        int ldb, float beta, cl_mem C, size_t c_off, int ldc) {
    if (M <= 0 || N <= 0) return CLCNN_SUCCESS;
    int backend = (int)ctx->gemm_backend;
    if (ctx->autotune && !ctx->gemm_forced) {
        /* Candidates: the device type's default, the GPU-shaped tiles on other devices (when
         * they can run them), and the portable kernels. CLBlast is left out on CPU devices: it
         * compiles for seconds and runs at a tenth of the CPU kernels. */
        static const int cpu_dev[2] = {CLCNN_GEMM_CPU, CLCNN_GEMM_OPENCL};
        static const int other_dev[3] = {CLCNN_GEMM_CLBLAST, CLCNN_GEMM_OPENCL, CLCNN_GEMM_GPU};
        static const char *const cpu_names[2] = {"cpu", "opencl"};
        static const char *const other_names[3] = {"clblast", "opencl", "gpu"};
        int is_cpu = ctx->info.type == CLCNN_DEVICE_CPU;
        int ncand = is_cpu ? 2 : ctx->gemm_tiled[0] ? 3 : 2;
        gemm_tuning t = {is_cpu ? cpu_dev : other_dev,
                         trans_a,
                         trans_b,
                         M,
                         N,
                         K,
                         lda,
                         ldb,
                         ldc,
                         alpha,
                         beta,
                         A,
                         B,
                         NULL,
                         a_off,
                         b_off};
        char key[80];
        clcnn_status st;
        snprintf(key, sizeof key, "gemm-%c%c-%d-%d-%d", trans_a ? 't' : 'n', trans_b ? 't' : 'n', M,
                 N, K);
        int c = clcnn_tune_choose(ctx, key, is_cpu ? cpu_names : other_names, ncand, gemm_tune_run,
                                  &t, &st);
        if (t.scratch) {
            clFinish(ctx->queue);
            clReleaseMemObject(t.scratch);
        }
        if (st) return st;
        if (c >= 0) backend = t.backends[c];
    }
    return gemm_on(ctx, backend, trans_a, trans_b, M, N, K, alpha, A, a_off, lda, B, b_off, ldb,
                   beta, C, c_off, ldc);
}
