/* The typed table of every kernel the library launches. A context resolves the whole list when
 * it is created (a source that lacks one fails there, naming it), and clcnn_kernel(ctx,
 * CLCNN_K_<name>) then reads its slot. A layer's kernels are named in its line of
 * src/layers/registry.h; the engine's own (GEMM, loss, optimizers, utilities) here. */
#ifndef CLCNN_KERNELS_H
#define CLCNN_KERNELS_H

#include "layers/registry.h"

/* clang-format off */
#define CLCNN_KERNEL_LIST(X)                                                                       \
    /* GEMM: portable and GPU-shaped (gemm.cl), CPU-shaped (gemm_cpu.cl) */                        \
    X(gemm_nn) X(gemm_nt) X(gemm_tn) X(gemm_tt)                                                    \
    X(gemm_tiled_nn) X(gemm_tiled_nt) X(gemm_tiled_tn) X(gemm_tiled_tt)                            \
    X(gemm_cpu_nn) X(gemm_cpu_tn) X(gemm_reduce) X(transpose_f32)                                  \
    /* loss (loss.cl), batches (data.cl), optimizers (optim.cl) */                                 \
    X(cross_entropy) X(loss_reduce) X(gather_batch) X(sgd_step) X(adam_step)                       \
    /* utilities and the peak-throughput probe (util.cl) */                                        \
    X(fill_f32) X(axpy_f32) X(bias_grad) X(peak_fma1) X(peak_fma4) X(peak_fma8) X(peak_fma16)      \
    /* each layer's own, from its registry line */                                                 \
    CLCNN_LAYER_LIST(CLCNN_LAYER_KERNELS_, X)
/* clang-format on */
#define CLCNN_LAYER_KERNELS_(UPPER, lower, kernels) kernels

typedef enum clcnn_kernel_id {
#define CLCNN_KERNEL_ENUM_(name) CLCNN_K_##name,
    CLCNN_KERNEL_LIST(CLCNN_KERNEL_ENUM_)
#undef CLCNN_KERNEL_ENUM_
        CLCNN_K_COUNT
} clcnn_kernel_id;

#endif
