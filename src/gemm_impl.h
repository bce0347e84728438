/* The interface every GEMM backend implements (after ggml's ggml_backend_i): a name, the GEMM
 * itself and a destructor, over state the backend owns. gemm.c makes one object per backend
 * the device can run when the context is created, and dispatches each call to one of them. */
#ifndef CLCNN_GEMM_IMPL_H
#define CLCNN_GEMM_IMPL_H

#include "context.h"

/* One call's operands: row-major C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C, op =
 * transpose when ta / tb is set; offsets and leading dimensions in elements. */
typedef struct clcnn_gemm_op {
    int ta, tb, M, N, K;
    float alpha;
    cl_mem A;
    size_t a_off;
    int lda;
    cl_mem B;
    size_t b_off;
    int ldb;
    float beta;
    cl_mem C;
    size_t c_off;
    int ldc;
} clcnn_gemm_op;

typedef struct clcnn_gemm_iface {
    const char *name; /* as CLCNN_BACKEND and the autotuning file spell it */
    /* Enqueues op on ctx's queue (M, N > 0), no host wait; failures go to ctx->err. */
    clcnn_status (*gemm)(clcnn_context *ctx, void *state, const clcnn_gemm_op *op);
    void (*free)(void *state); /* NULL when the backend keeps no state */
} clcnn_gemm_iface;

/* A backend object: its interface and its own state. iface NULL = not available. */
typedef struct clcnn_gemm_impl {
    const clcnn_gemm_iface *iface;
    void *state;
} clcnn_gemm_impl;

/* The constructors. Each fills *be, or fails with a message in ctx->err:
 * CLCNN_ERR_UNSUPPORTED when the device cannot run the backend's kernels. */
clcnn_status clcnn_gemm_cpu_init(clcnn_context *ctx, clcnn_gemm_impl *be);     /* gemm_cpu.c */
clcnn_status clcnn_gemm_opencl_init(clcnn_context *ctx, clcnn_gemm_impl *be);  /* gemm_opencl.c */
clcnn_status clcnn_gemm_gpu_init(clcnn_context *ctx, clcnn_gemm_impl *be);     /* gemm_opencl.c */
clcnn_status clcnn_gemm_clblast_init(clcnn_context *ctx, clcnn_gemm_impl *be); /* gemm_clblast.c */

#endif
