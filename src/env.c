/* Reads the CLCNN_* environment variables and merges them with a context's options (env.h). */
#include "env.h"

#include <stdlib.h>
#include <string.h>

/* A variable's value, NULL when unset or empty (both mean "not set"). */
static const char *var(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static clcnn_status bad_value(clcnn_error *e, const char *name, const char *value,
                              const char *accepted) {
    char shown[40 + 4];
    return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT, "%s='%s' is not %s", name,
                      clcnn_shown(value, 40, shown), accepted);
}

static clcnn_status resolve_backend(clcnn_settings *s, clcnn_backend opt, clcnn_error *e) {
    static const char *const words[] = {"cpu", "opencl", "clblast", "gpu"};
    const char *v;
    if (opt < CLCNN_BACKEND_DEFAULT || opt > CLCNN_BACKEND_GPU)
        return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT,
                          "clcnn_context_options.backend = %d is not a clcnn_backend", (int)opt);
    s->backend = opt;
    s->backend_from = opt ? "clcnn_context_options.backend" : NULL;
    if (opt || !(v = var("CLCNN_BACKEND"))) return CLCNN_SUCCESS;
    for (int i = 0; i < 4; i++)
        if (!strcmp(v, words[i])) {
            s->backend = (clcnn_backend)(CLCNN_BACKEND_CPU + i);
            s->backend_from = "CLCNN_BACKEND";
            return CLCNN_SUCCESS;
        }
    return bad_value(e, "CLCNN_BACKEND", v, "a backend (clblast, opencl, gpu, cpu)");
}

static clcnn_status resolve_conv_algo(clcnn_settings *s, clcnn_conv_algo opt, clcnn_error *e) {
    const char *v;
    if (opt < CLCNN_CONV_ALGO_DEFAULT || opt > CLCNN_CONV_ALGO_IMPLICIT)
        return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT,
                          "clcnn_context_options.conv_algo = %d is not a clcnn_conv_algo",
                          (int)opt);
    s->conv_algo = (int)opt; /* 0 = rules, 1 = direct, 2 = im2col, 3 = implicit */
    if (opt || !(v = var("CLCNN_CONV_ALGO"))) return CLCNN_SUCCESS;
    if (!strcmp(v, "auto")) return CLCNN_SUCCESS;
    if (!strcmp(v, "direct")) return s->conv_algo = 1, CLCNN_SUCCESS;
    if (!strcmp(v, "im2col")) return s->conv_algo = 2, CLCNN_SUCCESS;
    if (!strcmp(v, "implicit")) return s->conv_algo = 3, CLCNN_SUCCESS;
    return bad_value(e, "CLCNN_CONV_ALGO", v,
                     "a convolution algorithm (auto, direct, im2col, implicit)");
}

void clcnn_context_options_init(clcnn_context_options *opts) {
    if (!opts) return;
    memset(opts, 0, sizeof *opts);
    opts->struct_size = sizeof *opts;
}

clcnn_status clcnn_settings_resolve(clcnn_settings *s, const clcnn_context_options *given,
                                    clcnn_error *e) {
    clcnn_context_options o, *opts = &o;
    const char *v;
    clcnn_status st;
    memset(s, 0, sizeof *s);
    clcnn_context_options_init(&o);
    if (given && (st = clcnn_sized_in(e, "clcnn_context_options", &o, given, sizeof o))) return st;
    if ((st = resolve_backend(s, opts->backend, e)) != CLCNN_SUCCESS) return st;
    if ((st = resolve_conv_algo(s, opts->conv_algo, e)) != CLCNN_SUCCESS) return st;
    s->enable_profiling = opts->enable_profiling != 0;
    s->autotune = opts->autotune != 0;
    if (!s->autotune && (v = var("CLCNN_AUTOTUNE"))) {
        if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
            return bad_value(e, "CLCNN_AUTOTUNE", v, "0 or 1");
        s->autotune = !strcmp(v, "1");
    }
    /* Any other value of these two keeps the default: they only ever switch a detail. */
    v = var("CLCNN_PROFILE");
    s->profile_by_kernel = v && !strcmp(v, "kernels");
    v = var("CLCNN_CACHE");
    s->use_cache = !opts->disable_cache && !(v && !strcmp(v, "0"));
    if (s->use_cache) clcnn_env_cache_dir(s->cache_dir, sizeof s->cache_dir);
    if ((v = var("CLCNN_KERNEL_DIR"))) snprintf(s->kernel_dir, sizeof s->kernel_dir, "%s", v);
    if ((v = var("CLCNN_IMPLICIT_SIZE")))
        snprintf(s->implicit_size, sizeof s->implicit_size, "%s", v);
    return CLCNN_SUCCESS;
}

void clcnn_env_cache_dir(char *buf, size_t size) {
    const char *v;
    if ((v = var("CLCNN_CACHE_DIR")))
        snprintf(buf, size, "%s", v);
    else if ((v = var("XDG_CACHE_HOME")))
        snprintf(buf, size, "%s/clcnn", v);
    else if ((v = var("HOME")))
        snprintf(buf, size, "%s/.cache/clcnn", v);
    else if (size)
        buf[0] = '\0';
}

const char *clcnn_env_visible_devices(void) {
    return getenv("CLCNN_VISIBLE_DEVICES");
}
