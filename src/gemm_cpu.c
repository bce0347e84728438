/* The "cpu" GEMM backend: kernels shaped for CPU devices (cl/gemm_cpu.cl: 8x32 register tiles,
 * one work-item per group), with a transposed copy of B and split-K partial products in
 * scratch buffers the backend owns. */
#include <stdlib.h>

#include "gemm_impl.h"

typedef struct cpu_state {
    clcnn_kern *gemm[2]; /* NN, TN */
    clcnn_kern *transpose, *reduce;
    cl_mem scratch; /* transposed B */
    size_t scratch_cap;
    cl_mem partial; /* split-K partial products */
    size_t partial_cap;
} cpu_state;

/* Grows one of the scratch buffers to hold `need` floats. */
static clcnn_status grow(clcnn_context *ctx, cl_mem *buf, size_t *cap, size_t need,
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

/* Writes op(B) = B^T (B stored as N rows of K, leading dimension ldb) densely into the scratch
 * buffer as K rows of N. */
static clcnn_status transpose_b(clcnn_context *ctx, cpu_state *s, const clcnn_gemm_op *op) {
    size_t need = (size_t)op->N * (size_t)op->K;
    clcnn_status st =
        grow(ctx, &s->scratch, &s->scratch_cap, need, "allocating the GEMM transpose scratch");
    if (st) return st;
    clcnn_kern *k = s->transpose;
    int bo = (int)op->b_off;
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, s->scratch);
    CLCNN_ARG(&a, op->B);
    CLCNN_ARG(&a, bo);
    CLCNN_ARG(&a, op->ldb);
    CLCNN_ARG(&a, op->N);
    CLCNN_ARG(&a, op->K);
    size_t global[2] = {(size_t)(op->K + 15) / 16, (size_t)(op->N + 15) / 16};
    return clcnn_launch_nd(ctx, k, &a, 2, global);
}

/* C = alpha * sum of the S partial products + beta * C. */
static clcnn_status reduce(clcnn_context *ctx, cpu_state *s, const clcnn_gemm_op *op, int S) {
    clcnn_kern *r = s->reduce;
    int c_o = (int)op->c_off;
    clcnn_args b = {r->k, 0, CL_SUCCESS};
    CLCNN_ARG(&b, op->C);
    CLCNN_ARG(&b, c_o);
    CLCNN_ARG(&b, op->ldc);
    CLCNN_ARG(&b, s->partial);
    CLCNN_ARG(&b, op->M);
    CLCNN_ARG(&b, op->N);
    CLCNN_ARG(&b, S);
    CLCNN_ARG(&b, op->alpha);
    CLCNN_ARG(&b, op->beta);
    return clcnn_launch1d(ctx, r, &b, (size_t)op->M * op->N);
}

static clcnn_status cpu_gemm(clcnn_context *ctx, void *state, const clcnn_gemm_op *op) {
    cpu_state *s = state;
    clcnn_status st = CLCNN_SUCCESS;
    int M = op->M, N = op->N, K = op->K;
    cl_mem B = op->B;
    int bo = (int)op->b_off, ldb = op->ldb;
    if (op->tb) {
        if ((st = transpose_b(ctx, s, op))) return st;
        B = s->scratch, bo = 0, ldb = N;
    }
    /* Few output tiles over a long K (weight gradients: K = every pixel of the batch) would
     * stream B from memory once per row tile; splitting K into cache-sized chunks lets the
     * row tiles share each chunk, and a second pass adds the partial products. */
    int tiles = ((M + 7) / 8) * ((N + 31) / 32), kc = K, S = 1;
    if (K >= 4096 && tiles < 512) {
        kc = 512;
        S = (K + kc - 1) / kc;
        st = grow(ctx, &s->partial, &s->partial_cap, (size_t)S * M * N,
                  "allocating the split-K scratch");
        if (st) return st;
    }
    clcnn_kern *k = s->gemm[op->ta ? 1 : 0];
    int ao = (int)op->a_off, co = S > 1 ? 0 : (int)op->c_off, ldcc = S > 1 ? N : op->ldc;
    int cstride = M * N;
    float al = S > 1 ? 1.0f : op->alpha, be = S > 1 ? 0.0f : op->beta;
    cl_mem Cout = S > 1 ? s->partial : op->C;
    size_t global[3] = {(size_t)(M + 7) / 8, (size_t)(N + 31) / 32, (size_t)S};
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, M);
    CLCNN_ARG(&a, N);
    CLCNN_ARG(&a, K);
    CLCNN_ARG(&a, al);
    CLCNN_ARG(&a, op->A);
    CLCNN_ARG(&a, ao);
    CLCNN_ARG(&a, op->lda);
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
    return reduce(ctx, s, op, S);
}

static void cpu_free(void *state) {
    cpu_state *s = state;
    if (!s) return;
    if (s->scratch) clReleaseMemObject(s->scratch);
    if (s->partial) clReleaseMemObject(s->partial);
    free(s);
}

static const clcnn_gemm_iface cpu_iface = {"cpu", cpu_gemm, cpu_free};

clcnn_status clcnn_gemm_cpu_init(clcnn_context *ctx, clcnn_gemm_impl *be) {
    cpu_state *s = calloc(1, sizeof *s);
    if (!s) return clcnn_fail(&ctx->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    s->gemm[0] = clcnn_kernel(ctx, CLCNN_K_gemm_cpu_nn);
    s->gemm[1] = clcnn_kernel(ctx, CLCNN_K_gemm_cpu_tn);
    s->transpose = clcnn_kernel(ctx, CLCNN_K_transpose_f32);
    s->reduce = clcnn_kernel(ctx, CLCNN_K_gemm_reduce);
    be->iface = &cpu_iface;
    be->state = s;
    return CLCNN_SUCCESS;
}
