/* Context settings: each CLCNN_* variable a context reads (src/env.c) with a value the library
 * cannot use fails context creation with one line naming the variable and the accepted values;
 * the options' backend, conv_algo and autotune fields win over the environment (which is then
 * not read at all); out-of-range option values are errors. Contexts that succeed use the
 * binary cache of the environment, so after the first one each takes a fraction of a second. */
#include <unistd.h>

#include "context.h"
#include "gemm.h"
#include "testutil.h"
#include "tune.h"

static clcnn_devices *devs;
static int idx = -1;

/* A context with opts under `var`=`value` (NULL: unset); *st gets the status. */
static clcnn_context *make(const char *var, const char *value, const clcnn_context_options *opts,
                           clcnn_status *st) {
    clcnn_context *ctx = NULL;
    if (value)
        setenv(var, value, 1);
    else
        unsetenv(var);
    *st = clcnn_context_create(&ctx, devs, idx, opts);
    unsetenv(var);
    return ctx;
}

/* A bad value of `var` fails creation with one line naming it, its value and `accepted`. */
static void check_bad(const char *var, const char *value, const char *accepted) {
    clcnn_status st;
    char want[128];
    clcnn_context *ctx = make(var, value, NULL, &st);
    const char *m = clcnn_context_errmsg(ctx);
    snprintf(want, sizeof want, "%s='%s'", var, value);
    CHECK_MSG(st == CLCNN_ERR_INVALID_ARGUMENT && strstr(m, want) && strstr(m, accepted) &&
                  !strchr(m, '\n'),
              "%s=%s: status %d, message '%s'", var, value, (int)st, m);
    clcnn_context_free(ctx);
}

static void check_backend(const char *env, clcnn_backend opt, clcnn_gemm_backend want) {
    clcnn_context_options o;
    clcnn_context_options_init(&o);
    clcnn_status st;
    o.backend = opt;
    clcnn_context *ctx = make("CLCNN_BACKEND", env, &o, &st);
    CHECK_MSG(st == CLCNN_SUCCESS && clcnn_gemm_kind(ctx) == want,
              "CLCNN_BACKEND=%s, options %d: status %d (%s), backend %s, want %s", env ? env : "",
              (int)opt, (int)st, clcnn_context_errmsg(ctx),
              st ? "-" : clcnn_gemm_backend_name(clcnn_gemm_kind(ctx)),
              clcnn_gemm_backend_name(want));
    clcnn_context_free(ctx);
}

static void check_conv_algo(const char *env, clcnn_conv_algo opt, int want) {
    clcnn_context_options o;
    clcnn_context_options_init(&o);
    clcnn_status st;
    o.conv_algo = opt;
    clcnn_context *ctx = make("CLCNN_CONV_ALGO", env, &o, &st);
    CHECK_MSG(st == CLCNN_SUCCESS && ctx->conv_algo == want,
              "CLCNN_CONV_ALGO=%s, options %d: status %d (%s), conv_algo %d, want %d",
              env ? env : "", (int)opt, (int)st, clcnn_context_errmsg(ctx),
              st ? -1 : ctx->conv_algo, want);
    clcnn_context_free(ctx);
}

static void check_autotune(const char *env, int opt, int want) {
    clcnn_context_options o;
    clcnn_context_options_init(&o);
    clcnn_status st;
    o.autotune = opt;
    o.disable_cache = 1; /* no tuning file: this only asks whether tuning is on */
    clcnn_context *ctx = make("CLCNN_AUTOTUNE", env, &o, &st);
    CHECK_MSG(st == CLCNN_SUCCESS && clcnn_tune_enabled(ctx) == want,
              "CLCNN_AUTOTUNE=%s, options %d: status %d (%s), want tuning %d", env ? env : "", opt,
              (int)st, clcnn_context_errmsg(ctx), want);
    clcnn_context_free(ctx);
}

/* Bad values in the environment and in the options: one clear line each, before any kernel is
 * built. */
static void check_bad_values(void) {
    check_bad("CLCNN_CONV_ALGO", "fast", "auto, direct, im2col, implicit");
    check_bad("CLCNN_CONV_ALGO", "Direct", "auto, direct, im2col, implicit");
    check_bad("CLCNN_BACKEND", "cuda", "clblast, opencl, gpu, cpu");
    check_bad("CLCNN_AUTOTUNE", "yes", "0 or 1");
    /* A control character in the value is shown escaped: the message stays one line. */
    {
        clcnn_status st;
        clcnn_context *ctx = make("CLCNN_CONV_ALGO", "a\nb", NULL, &st);
        const char *m = clcnn_context_errmsg(ctx);
        CHECK_MSG(st == CLCNN_ERR_INVALID_ARGUMENT && strstr(m, "CLCNN_CONV_ALGO") &&
                      !strchr(m, '\n'),
                  "a newline in CLCNN_CONV_ALGO: status %d, message '%s'", (int)st, m);
        clcnn_context_free(ctx);
    }

    /* Options out of their enums. */
    {
        clcnn_context_options o;
        clcnn_context_options_init(&o);
        clcnn_context *ctx = NULL;
        o.backend = (clcnn_backend)99;
        CHECK(clcnn_context_create(&ctx, devs, idx, &o) == CLCNN_ERR_INVALID_ARGUMENT &&
              strstr(clcnn_context_errmsg(ctx), "clcnn_context_options.backend"));
        clcnn_context_free(ctx);
        ctx = NULL;
        o.backend = CLCNN_BACKEND_DEFAULT;
        o.conv_algo = (clcnn_conv_algo)-1;
        CHECK(clcnn_context_create(&ctx, devs, idx, &o) == CLCNN_ERR_INVALID_ARGUMENT &&
              strstr(clcnn_context_errmsg(ctx), "clcnn_context_options.conv_algo"));
        clcnn_context_free(ctx);
        ctx = NULL;
        o.conv_algo = (clcnn_conv_algo)(CLCNN_CONV_ALGO_IMPLICIT + 1);
        CHECK(clcnn_context_create(&ctx, devs, idx, &o) == CLCNN_ERR_INVALID_ARGUMENT &&
              strstr(clcnn_context_errmsg(ctx), "clcnn_context_options.conv_algo"));
        clcnn_context_free(ctx);
    }
}

int main(void) {
    clcnn_device_info info;
    static const char *const vars[] = {"CLCNN_BACKEND", "CLCNN_CONV_ALGO", "CLCNN_AUTOTUNE",
                                       "CLCNN_IMPLICIT_SIZE"};
    for (int i = 0; i < 4; i++)
        unsetenv(vars[i]);
    if (clcnn_devices_create(&devs, NULL) != CLCNN_SUCCESS || clcnn_devices_count(devs) == 0) {
        fprintf(stderr, "no OpenCL device: skipping\n");
        clcnn_devices_free(devs);
        return 77;
    }
    clcnn_devices_select(devs, -1, -1, &idx);
    clcnn_devices_get(devs, idx, &info);
    clcnn_gemm_backend dflt = info.type == CLCNN_DEVICE_CPU ? CLCNN_GEMM_CPU : CLCNN_GEMM_CLBLAST;

    check_bad_values();

    /* GEMM backend: the default per device type, the environment, the options over it (even
     * over a value the environment alone would reject). */
    check_backend(NULL, CLCNN_BACKEND_DEFAULT, dflt);
    check_backend("opencl", CLCNN_BACKEND_DEFAULT, CLCNN_GEMM_OPENCL);
    check_backend("clblast", CLCNN_BACKEND_CPU, CLCNN_GEMM_CPU);
    check_backend("cpu", CLCNN_BACKEND_OPENCL, CLCNN_GEMM_OPENCL);
    check_backend("cuda", CLCNN_BACKEND_CLBLAST, CLCNN_GEMM_CLBLAST);
    /* gpu where the device runs it; else an error that says who asked for it */
    {
        clcnn_context_options o;
        clcnn_context_options_init(&o);
        clcnn_status st;
        o.backend = CLCNN_BACKEND_GPU;
        clcnn_context *ctx = make("CLCNN_BACKEND", "cpu", &o, &st);
        const char *m = clcnn_context_errmsg(ctx);
        CHECK_MSG(
            (st == CLCNN_SUCCESS && clcnn_gemm_kind(ctx) == CLCNN_GEMM_GPU) ||
                (st == CLCNN_ERR_UNSUPPORTED && strstr(m, "clcnn_context_options.backend=gpu")),
            "options gpu: status %d, message '%s'", (int)st, m);
        printf("options.backend = gpu on %s: %s\n", info.name, st ? m : "runs");
        clcnn_context_free(ctx);
    }

    /* Convolution algorithm: 0 = rules, 1 = direct, 2 = im2col. */
    check_conv_algo(NULL, CLCNN_CONV_ALGO_DEFAULT, 0);
    check_conv_algo("auto", CLCNN_CONV_ALGO_DEFAULT, 0);
    check_conv_algo("direct", CLCNN_CONV_ALGO_DEFAULT, 1);
    check_conv_algo("im2col", CLCNN_CONV_ALGO_DEFAULT, 2);
    check_conv_algo("im2col", CLCNN_CONV_ALGO_DIRECT, 1);
    check_conv_algo("direct", CLCNN_CONV_ALGO_IM2COL, 2);
    check_conv_algo("fast", CLCNN_CONV_ALGO_IM2COL, 2);
    check_conv_algo("implicit", CLCNN_CONV_ALGO_DEFAULT, 3);
    check_conv_algo("direct", CLCNN_CONV_ALGO_IMPLICIT, 3);

    /* The implicit-GEMM size: a name of the table, or, for a size the device's limits rule out
     * (Intel's CPU runtime allows 64x128's kernels 208 work-items), one line saying so. */
    {
        static const char *const sizes[] = {"auto", "64", "32", "64x128", "64w8"};
        for (int z = 0; z < 5; z++) {
            clcnn_status st;
            clcnn_context *ctx = make("CLCNN_IMPLICIT_SIZE", sizes[z], NULL, &st);
            const char *m = clcnn_context_errmsg(ctx);
            CHECK_MSG((st == CLCNN_SUCCESS && ctx->implicit_size == z) ||
                          (z > 0 && st == CLCNN_ERR_INVALID_ARGUMENT &&
                           strstr(m, "does not run on") && !strchr(m, '\n')),
                      "CLCNN_IMPLICIT_SIZE=%s: status %d (%s), size %d", sizes[z], (int)st, m,
                      st ? -1 : ctx->implicit_size);
            clcnn_context_free(ctx);
        }
        check_bad("CLCNN_IMPLICIT_SIZE", "48", "auto, 64, 32, 64x128, 64w8");
        check_bad("CLCNN_IMPLICIT_SIZE", "64X128", "auto, 64, 32, 64x128, 64w8");
    }

    /* Autotuning: the option turns it on whatever the environment says. */
    check_autotune(NULL, 0, 0);
    check_autotune("1", 0, 1);
    check_autotune("0", 1, 1);
    check_autotune("yes", 1, 1);

    clcnn_devices_free(devs);
    return test_finish("test_context");
}
