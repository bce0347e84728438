/* The public context: the device context (context.c) with the parts that sit above it, the
 * GEMM backends, the tuner and the layers' settings, attached once its kernels are built and
 * freed before it is closed. */
#include "context.h"
#include "gemm.h"
#include "layers/layer.h"
#include "tune.h"

/* The parts above the device context, from the resolved settings; then the creation's time. */
static clcnn_status attach(clcnn_context *ctx, const clcnn_settings *s, double t0) {
    clcnn_status st;
    if ((st = clcnn_gemm_init(ctx, s)) != CLCNN_SUCCESS) return st;
    if (s->autotune && (st = clcnn_tuner_create(&ctx->tuner, &ctx->info, s->cache_dir,
                                                &ctx->err)) != CLCNN_SUCCESS)
        return st;
    ctx->conv_algo = s->conv_algo;
    if ((st = clcnn_conv_implicit_size(ctx, s->implicit_size)) != CLCNN_SUCCESS) return st;
    ctx->build_seconds = clcnn_now_seconds() - t0;
    return CLCNN_SUCCESS;
}

clcnn_status clcnn_context_create(clcnn_context **out, const clcnn_devices *devs, int index,
                                  const clcnn_context_options *opts) {
    clcnn_settings s;
    double t0 = clcnn_now_seconds();
    clcnn_status st = clcnn_context_open(out, devs, index, opts, &s);
    return st ? st : attach(*out, &s, t0);
}

clcnn_status clcnn_context_create_from_cl(clcnn_context **out, void *cl_context,
                                          void *cl_command_queue,
                                          const clcnn_context_options *opts) {
    clcnn_settings s;
    double t0 = clcnn_now_seconds();
    clcnn_status st = clcnn_context_open_cl(out, cl_context, cl_command_queue, opts, &s);
    return st ? st : attach(*out, &s, t0);
}

void clcnn_context_free(clcnn_context *ctx) {
    if (!ctx) return;
    /* The backends and the tuner may own device objects the queue still uses. */
    if (ctx->queue) clFinish(ctx->queue);
    clcnn_gemm_free(ctx->gemm);
    clcnn_tuner_free(ctx->tuner);
    ctx->gemm = NULL;
    ctx->tuner = NULL;
    clcnn_context_close(ctx);
}
