/* Two GEMM backends over cl/gemm.cl that take the same arguments: "opencl", the portable
 * kernels (gemm_*: 4x4 blocks per work-item, the driver's group size), and "gpu", the
 * GPU-shaped ones (gemm_tiled_*: 64x64 tiles per 16x16 group staged through local memory). */
#include <stdlib.h>

#include "gemm_impl.h"

typedef struct opencl_state {
    clcnn_kern *k[4]; /* NN, NT, TN, TT */
    int tiled;
} opencl_state;

static clcnn_status opencl_gemm(clcnn_context *ctx, void *state, const clcnn_gemm_op *op) {
    const opencl_state *s = state;
    clcnn_kern *k = s->k[(op->ta ? 2 : 0) + (op->tb ? 1 : 0)];
    int ao = (int)op->a_off, bo = (int)op->b_off, co = (int)op->c_off;
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, op->M);
    CLCNN_ARG(&a, op->N);
    CLCNN_ARG(&a, op->K);
    CLCNN_ARG(&a, op->alpha);
    CLCNN_ARG(&a, op->A);
    CLCNN_ARG(&a, ao);
    CLCNN_ARG(&a, op->lda);
    CLCNN_ARG(&a, op->B);
    CLCNN_ARG(&a, bo);
    CLCNN_ARG(&a, op->ldb);
    CLCNN_ARG(&a, op->beta);
    CLCNN_ARG(&a, op->C);
    CLCNN_ARG(&a, co);
    CLCNN_ARG(&a, op->ldc);
    if (!s->tiled) {
        size_t global[2] = {(size_t)(op->N + 3) / 4, (size_t)(op->M + 3) / 4};
        return clcnn_launch(ctx, k, &a, 2, global, NULL);
    }
    size_t global[2] = {(size_t)(op->N + 63) / 64 * 16, (size_t)(op->M + 63) / 64 * 16};
    static const size_t local[2] = {16, 16};
    return clcnn_launch(ctx, k, &a, 2, global, local);
}

static const clcnn_gemm_iface opencl_iface = {"opencl", opencl_gemm, free};
static const clcnn_gemm_iface gpu_iface = {"gpu", opencl_gemm, free};

static clcnn_status make(clcnn_context *ctx, clcnn_gemm_impl *be, int tiled,
                         const clcnn_kernel_id ids[4]) {
    opencl_state *s = calloc(1, sizeof *s);
    if (!s) return clcnn_fail(&ctx->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (int i = 0; i < 4; i++)
        s->k[i] = clcnn_kernel(ctx, ids[i]);
    s->tiled = tiled;
    be->iface = tiled ? &gpu_iface : &opencl_iface;
    be->state = s;
    return CLCNN_SUCCESS;
}

clcnn_status clcnn_gemm_opencl_init(clcnn_context *ctx, clcnn_gemm_impl *be) {
    static const clcnn_kernel_id ids[4] = {CLCNN_K_gemm_nn, CLCNN_K_gemm_nt, CLCNN_K_gemm_tn,
                                           CLCNN_K_gemm_tt};
    return make(ctx, be, 0, ids);
}

clcnn_status clcnn_gemm_gpu_init(clcnn_context *ctx, clcnn_gemm_impl *be) {
    static const clcnn_kernel_id ids[4] = {CLCNN_K_gemm_tiled_nn, CLCNN_K_gemm_tiled_nt,
                                           CLCNN_K_gemm_tiled_tn, CLCNN_K_gemm_tiled_tt};
    cl_ulong local = 0;
    /* 16x16 work-groups and 8.3 KB of local memory: asked of the kernels and the device, not
     * assumed. */
    if (clGetDeviceInfo(ctx->device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local, &local, NULL) !=
            CL_SUCCESS ||
        local < 2 * 16 * 65 * sizeof(float))
        local = 0;
    for (int i = 0; i < 4 && local; i++)
        if (clcnn_kernel(ctx, ids[i])->max_wg < 256) local = 0;
    if (!local)
        return clcnn_fail(&ctx->err, CLCNN_ERR_UNSUPPORTED,
                          "this device cannot run 16x16 work-groups with 8.3 KB of local memory");
    return make(ctx, be, 1, ids);
}
