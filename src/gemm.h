/* The GEMM interface every layer calls. Backends live behind it: CLBlast, clcnn's portable
 * kernels and GPU-shaped tiled kernels (cl/gemm.cl) and its CPU-shaped kernels
 * (cl/gemm_cpu.cl). CLCNN_BACKEND=clblast|opencl|gpu|cpu forces one; by default CPU devices
 * get "cpu" and other devices "clblast". */
#ifndef CLCNN_GEMM_H
#define CLCNN_GEMM_H

#include "context.h"

typedef enum clcnn_gemm_backend {
    CLCNN_GEMM_CLBLAST = 0,
    CLCNN_GEMM_OPENCL = 1,
    CLCNN_GEMM_CPU = 2,
    CLCNN_GEMM_GPU = 3 /* local-memory tiled, 16x16 work-groups (cl/gemm.cl gemm_tiled_*) */
} clcnn_gemm_backend;

/* Picks the backend for ctx (CLCNN_BACKEND, else a per-device default). Called once by
 * clcnn_context_create. Unknown CLCNN_BACKEND values are an error. */
clcnn_status clcnn_gemm_init(clcnn_context *ctx);

/* Row-major C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C, op = transpose when the flag is
 * set; offsets and leading dimensions in elements. Enqueued on ctx's queue, no host wait. */
clcnn_status clcnn_gemm(clcnn_context *ctx, int trans_a, int trans_b, int M, int N, int K,
                        float alpha, cl_mem A, size_t a_off, int lda, cl_mem B, size_t b_off,
                        int ldb, float beta, cl_mem C, size_t c_off, int ldc);

const char *clcnn_gemm_backend_name(clcnn_gemm_backend b);

#endif
