/* The one place the library reads its CLCNN_* environment variables. A context's settings are
 * its options merged with the environment: an option set explicitly (non-zero) wins, and a
 * variable is consulted (and a bad value in it reported) only where its option was left at 0.
 * README.md's "Environment variables" section lists them all. */
#ifndef CLCNN_ENV_H
#define CLCNN_ENV_H

#include "common.h"

/* A context's resolved settings. */
typedef struct clcnn_settings {
    clcnn_backend backend;    /* CLCNN_BACKEND_DEFAULT: the rule per device type decides */
    const char *backend_from; /* "CLCNN_BACKEND" or "clcnn_context_options.backend" when set */
    int autotune;             /* 0 or 1 */
    int enable_profiling;     /* clcnn_context_options.enable_profiling, 0 or 1 */
    int profile_by_kernel;    /* CLCNN_PROFILE=kernels: profiled sections split per kernel */
    int use_cache;            /* program-binary and autotuning files on disk */
    int conv_algo;            /* 0 = rules per device, 1 = direct, 2 = im2col, 3 = implicit */
    char cache_dir[4096];     /* "" when none can be determined (or use_cache is 0) */
    char kernel_dir[4096];    /* CLCNN_KERNEL_DIR; "" = the embedded sources */
    char implicit_size[48];   /* CLCNN_IMPLICIT_SIZE as given ("" when unset); checked against
                                 the implicit-GEMM sizes once the kernels are built */
} clcnn_settings;

/* Fills *s from opts (NULL: all defaults; else its struct_size must be one this library knows)
 * and the environment. A value the library cannot use (an unknown CLCNN_BACKEND, a
 * CLCNN_AUTOTUNE other than 0 or 1, an option out of its enum) is CLCNN_ERR_INVALID_ARGUMENT
 * with one line in e naming the variable and its accepted values. */
clcnn_status clcnn_settings_resolve(clcnn_settings *s, const clcnn_context_options *opts,
                                    clcnn_error *e);

/* The cache folder: $CLCNN_CACHE_DIR, else $XDG_CACHE_HOME/clcnn, else $HOME/.cache/clcnn;
 * "" when none can be determined. */
void clcnn_env_cache_dir(char *buf, size_t size);

/* CLCNN_VISIBLE_DEVICES as it is now (NULL when unset): the device list's default filter. */
const char *clcnn_env_visible_devices(void);

#endif
