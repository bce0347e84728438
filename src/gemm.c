/* GEMM dispatch: the context's backend objects (gemm_impl.h), the default among them, and the
 * autotuned choice per shape. */
#include "gemm.h"

#include <stdlib.h>
#include <string.h>

#include "gemm_impl.h"
#include "tune.h"

struct clcnn_gemm_set {
    clcnn_gemm_backend kind; /* the default */
    int forced;              /* chosen by options or CLCNN_BACKEND: never autotuned */
    clcnn_gemm_impl be[4];   /* indexed by clcnn_gemm_backend; iface NULL when unavailable */
};

const char *clcnn_gemm_backend_name(clcnn_gemm_backend b) {
    return b == CLCNN_GEMM_CLBLAST ? "clblast"
           : b == CLCNN_GEMM_CPU   ? "cpu"
           : b == CLCNN_GEMM_GPU   ? "gpu"
                                   : "opencl";
}

clcnn_gemm_backend clcnn_gemm_kind(const clcnn_context *ctx) {
    return ctx->gemm->kind;
}

static clcnn_gemm_backend from_public(clcnn_backend b) {
    return b == CLCNN_BACKEND_CPU      ? CLCNN_GEMM_CPU
           : b == CLCNN_BACKEND_OPENCL ? CLCNN_GEMM_OPENCL
           : b == CLCNN_BACKEND_GPU    ? CLCNN_GEMM_GPU
                                       : CLCNN_GEMM_CLBLAST;
}

clcnn_status clcnn_gemm_init(clcnn_context *ctx, const clcnn_settings *s) {
    clcnn_gemm_set *g = ctx->gemm = calloc(1, sizeof *g);
    clcnn_status st;
    if (!g) return clcnn_fail(&ctx->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    g->forced = s->backend != CLCNN_BACKEND_DEFAULT;
    /* CLBlast's kernels are shaped for GPUs and run at a fraction of the portable kernels'
     * speed on CPU devices (docs/PERFORMANCE.md); GPUs get CLBlast. */
    g->kind = g->forced                            ? from_public(s->backend)
              : ctx->info.type == CLCNN_DEVICE_CPU ? CLCNN_GEMM_CPU
                                                   : CLCNN_GEMM_CLBLAST;
    if ((st = clcnn_gemm_clblast_init(ctx, &g->be[CLCNN_GEMM_CLBLAST])) ||
        (st = clcnn_gemm_opencl_init(ctx, &g->be[CLCNN_GEMM_OPENCL])) ||
        (st = clcnn_gemm_cpu_init(ctx, &g->be[CLCNN_GEMM_CPU])))
        return st;
    clcnn_error before = ctx->err;
    if ((st = clcnn_gemm_gpu_init(ctx, &g->be[CLCNN_GEMM_GPU])) == CLCNN_ERR_UNSUPPORTED) {
        if (g->kind == CLCNN_GEMM_GPU) {
            char why[sizeof ctx->err.msg];
            memcpy(why, ctx->err.msg, sizeof why);
            return clcnn_fail(&ctx->err, st, "%s=gpu: %.200s", s->backend_from, why);
        }
        ctx->err = before; /* not an error: the other backends serve */
        st = CLCNN_SUCCESS;
    }
    return st;
}

void clcnn_gemm_free(clcnn_gemm_set *g) {
    if (!g) return;
    for (int i = 0; i < 4; i++)
        if (g->be[i].iface && g->be[i].iface->free) g->be[i].iface->free(g->be[i].state);
    free(g);
}

static clcnn_status gemm_on(clcnn_context *ctx, clcnn_gemm_backend b, const clcnn_gemm_op *op) {
    const clcnn_gemm_impl *be = &ctx->gemm->be[b];
    return be->iface->gemm(ctx, be->state, op);
}

/* A GEMM call being tuned: the candidates write into a scratch C of the same shape, so the
 * real C (which beta may read) is written once, by the winner. */
typedef struct gemm_tuning {
    const clcnn_gemm_backend *backends;
    clcnn_gemm_op op; /* C = the scratch */
} gemm_tuning;

static clcnn_status gemm_tune_run(clcnn_context *ctx, int c, void *arg) {
    gemm_tuning *t = arg;
    cl_int rc = CL_SUCCESS;
    if (!t->op.C) {
        t->op.C = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE,
                                 (size_t)t->op.M * (size_t)t->op.ldc * sizeof(float), NULL, &rc);
        if (rc != CL_SUCCESS) {
            t->op.C = NULL;
            return clcnn_cl_fail(ctx, rc, "autotuning scratch");
        }
    }
    return gemm_on(ctx, t->backends[c], &t->op);
}

/* The backend autotuning picks for op, or the default when tuning decides nothing. */
static clcnn_status tuned_backend(clcnn_context *ctx, const clcnn_gemm_op *op,
                                  clcnn_gemm_backend *out) {
    /* Candidates: the device type's default, the GPU-shaped tiles on other devices (when they
     * can run them), and the portable kernels. CLBlast is left out on CPU devices: it compiles
     * for seconds and runs at a tenth of the CPU kernels. */
    static const clcnn_gemm_backend cpu_dev[2] = {CLCNN_GEMM_CPU, CLCNN_GEMM_OPENCL};
    static const clcnn_gemm_backend other_dev[3] = {CLCNN_GEMM_CLBLAST, CLCNN_GEMM_OPENCL,
                                                    CLCNN_GEMM_GPU};
    static const char *const cpu_names[2] = {"cpu", "opencl"};
    static const char *const other_names[3] = {"clblast", "opencl", "gpu"};
    int is_cpu = ctx->info.type == CLCNN_DEVICE_CPU;
    int ncand = is_cpu ? 2 : ctx->gemm->be[CLCNN_GEMM_GPU].iface ? 3 : 2;
    gemm_tuning t = {is_cpu ? cpu_dev : other_dev, *op};
    char key[80];
    clcnn_status st;
    t.op.C = NULL, t.op.c_off = 0;
    snprintf(key, sizeof key, "gemm-%c%c-%d-%d-%d", op->ta ? 't' : 'n', op->tb ? 't' : 'n', op->M,
             op->N, op->K);
    int c = clcnn_tune_choose(ctx, key, is_cpu ? cpu_names : other_names, ncand, gemm_tune_run, &t,
                              &st);
    if (t.op.C) {
        clFinish(ctx->queue);
        clReleaseMemObject(t.op.C);
    }
    if (!st && c >= 0) *out = t.backends[c];
    return st;
}

clcnn_status clcnn_gemm(clcnn_context *ctx, int trans_a, int trans_b, int M, int N, int K,
                        float alpha, cl_mem A, size_t a_off, int lda, cl_mem B, size_t b_off,
                        int ldb, float beta, cl_mem C, size_t c_off, int ldc) {
    if (M <= 0 || N <= 0) return CLCNN_SUCCESS;
    clcnn_gemm_op op = {trans_a, trans_b, M,     N,   K,    alpha, A,     a_off,
                        lda,     B,       b_off, ldb, beta, C,     c_off, ldc};
    clcnn_gemm_backend b = ctx->gemm->kind;
    if (clcnn_tune_enabled(ctx) && !ctx->gemm->forced) {
        clcnn_status st = tuned_backend(ctx, &op, &b);
        if (st) return st;
    }
    return gemm_on(ctx, b, &op);
}
