/* The GEMM interface every layer calls. Four backends live behind it, each an object
 * (gemm_impl.h): "cpu" (kernels shaped for CPU devices, gemm_cpu.c), "opencl" (portable
 * kernels) and "gpu" (local-memory tiles; only where the device can run them), both in
 * gemm_opencl.c, and "clblast" (CLBlast, gemm_clblast.c). clcnn_context_options.backend or
 * CLCNN_BACKEND forces one; by default CPU devices get "cpu" and other devices "clblast", and
 * with autotuning each GEMM shape times the candidates for the device type. */
#ifndef CLCNN_GEMM_H
#define CLCNN_GEMM_H

#include "context.h"
#include "env.h"

typedef enum clcnn_gemm_backend {
    CLCNN_GEMM_CLBLAST = 0,
    CLCNN_GEMM_OPENCL = 1,
    CLCNN_GEMM_CPU = 2,
    CLCNN_GEMM_GPU = 3 /* local-memory tiled, 16x16 work-groups (cl/gemm.cl gemm_tiled_*) */
} clcnn_gemm_backend;

/* A context's GEMM dispatcher: every backend the device can run, and the one used by default. */
typedef struct clcnn_gemm_set clcnn_gemm_set;

/* Makes the backend objects and picks the default (s->backend, else per device type). Called
 * once by context creation, after the kernel table is resolved. A forced "gpu" on a device
 * that cannot run it is CLCNN_ERR_UNSUPPORTED. */
clcnn_status clcnn_gemm_init(clcnn_context *ctx, const clcnn_settings *s);
/* Frees the backends (and their buffers). The queue must be idle. NULL is a no-op. */
void clcnn_gemm_free(clcnn_gemm_set *g);

/* Row-major C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C, op = transpose when the flag is
 * set; offsets and leading dimensions in elements. Enqueued on ctx's queue, no host wait. */
clcnn_status clcnn_gemm(clcnn_context *ctx, int trans_a, int trans_b, int M, int N, int K,
                        float alpha, cl_mem A, size_t a_off, int lda, cl_mem B, size_t b_off,
                        int ldb, float beta, cl_mem C, size_t c_off, int ldc);

/* The context's default backend: the one every GEMM uses unless autotuning picks another. */
clcnn_gemm_backend clcnn_gemm_kind(const clcnn_context *ctx);

const char *clcnn_gemm_backend_name(clcnn_gemm_backend b);

#endif
