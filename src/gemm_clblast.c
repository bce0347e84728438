/* The "clblast" GEMM backend: CLBlast's SGEMM on the context's queue. CLBlast keeps its own
 * compiled-kernel cache, so the backend holds no state. */
#include <clblast_c.h>

#include "gemm_impl.h"

#ifndef CLCNN_CLBLAST_VERSION
#define CLCNN_CLBLAST_VERSION "unknown"
#endif

const char *clcnn_blas_version(void) {
    return CLCNN_CLBLAST_VERSION;
}

static clcnn_status clblast_gemm(clcnn_context *ctx, void *state, const clcnn_gemm_op *op) {
    (void)state;
    CLBlastStatusCode rc =
        CLBlastSgemm(CLBlastLayoutRowMajor, op->ta ? CLBlastTransposeYes : CLBlastTransposeNo,
                     op->tb ? CLBlastTransposeYes : CLBlastTransposeNo, (size_t)op->M,
                     (size_t)op->N, (size_t)op->K, op->alpha, op->A, op->a_off, (size_t)op->lda,
                     op->B, op->b_off, (size_t)op->ldb, op->beta, op->C, op->c_off, (size_t)op->ldc,
                     &ctx->queue, clcnn_prof_slot(ctx, "CLBlastSgemm"));
    if (rc == CLBlastSuccess) return CLCNN_SUCCESS;
    if ((int)rc < 0 && (int)rc > -100)
        return clcnn_fail(&ctx->err, (clcnn_status)rc, "CLBlastSgemm(%d,%d,%d) failed: %s", op->M,
                          op->N, op->K, clcnn_cl_error_name((int)rc));
    return clcnn_fail(&ctx->err, CLCNN_ERR_BLAS, "CLBlastSgemm(%d,%d,%d) failed: status %d", op->M,
                      op->N, op->K, (int)rc);
}

static const clcnn_gemm_iface clblast_iface = {"clblast", clblast_gemm, NULL};

clcnn_status clcnn_gemm_clblast_init(clcnn_context *ctx, clcnn_gemm_impl *be) {
    (void)ctx;
    be->iface = &clblast_iface;
    be->state = NULL;
    return CLCNN_SUCCESS;
}
