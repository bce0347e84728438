/* Kernel programs: the embedded .cl sources, building them for a device, and the on-disk
 * program-binary cache. */
#ifndef CLCNN_PROGRAM_H
#define CLCNN_PROGRAM_H

#include <stddef.h>

#include <CL/cl.h>

#include "common.h"

typedef struct clcnn_kernel_source {
    const char *name; /* file name without .cl */
    const char *src;  /* NUL-terminated */
    size_t len;
} clcnn_kernel_source;

/* Generated at build time from the cl folder (cmake/EmbedKernelsRun.cmake). */
extern const clcnn_kernel_source clcnn_kernel_sources[];
extern const int clcnn_kernel_source_count;

/* Builds one program per kernel source for `device` with `options`: the embedded sources, or
 * kernel_dir/<name>.cl when kernel_dir is not "". Binaries are cached in cache_dir ("" = no
 * cache) when it is a private folder of this user (clcnn_private_dir_why); an entry is used
 * only when it was made for its key and its binary defines the kernels its source did, and
 * when the programs together still lack one of the n_required kernels, those from the cache
 * are compiled again and their entries replaced. progs must hold clcnn_kernel_source_count
 * entries; on failure every program already made is released. *all_cached is set to 1 when
 * every program came from the cache. note (note_size bytes) receives one line for the user
 * when the cache was refused or repaired, "" otherwise. */
clcnn_status clcnn_programs_build(cl_context context, cl_device_id device,
                                  const clcnn_device_info *info, const char *options,
                                  const char *cache_dir, const char *kernel_dir,
                                  const char *const *required, int n_required, cl_program *progs,
                                  int *all_cached, char *note, size_t note_size, clcnn_error *e);

#endif
