/* Files the library writes or trusts: temporary files that cannot be redirected by a planted
 * link, the sweep of temporary files a crashed process left behind, and private cache folders. */
#ifndef CLCNN_FILES_H
#define CLCNN_FILES_H

#include <stddef.h>

#include "common.h"

/* Creates a fresh temporary file beside `path` for an atomic replace: "<path>.tmp.<pid>.<six
 * random characters>", opened with O_CREAT | O_EXCL | O_NOFOLLOW and mode 0600, so an existing
 * file or a symbolic link planted under that name is never opened. *tmp receives the name
 * (malloc'd; the caller frees it) and *fd the descriptor, open for writing. */
clcnn_status clcnn_tmp_create(const char *path, char **tmp, int *fd, clcnn_error *e);

/* Removes what crashed processes left of their atomic replaces in folder `dir`: files
 * named "<name><suffix>.tmp.<pid>" or "<name><suffix>.tmp.<pid>.<random>" whose process no
 * longer runs (suffix ".safetensors" for checkpoints). Temporary files of live processes, such
 * as another run saving into the same folder, are left alone. Best effort: errors are ignored. */
void clcnn_tmp_sweep(const char *dir, const char *suffix);

/* Flushes fd to disk, gives the file the mode a new file would have (0666 less the umask)
 * when `shared`, else leaves it 0600, and closes fd (either way). On failure tmp is removed
 * and e names path. */
clcnn_status clcnn_tmp_close(int fd, const char *tmp, const char *path, int shared, clcnn_error *e);

/* Renames a closed temporary file over path and syncs the folder; on failure tmp is removed. */
clcnn_status clcnn_tmp_rename(const char *tmp, const char *path, clcnn_error *e);

/* One piece of a file: size bytes at data. */
typedef struct clcnn_piece {
    const void *data;
    size_t size;
} clcnn_piece;

/* The first half of an atomic replace, for callers that write several files before renaming
 * any: writes the n pieces in order to a fresh temporary file beside path (clcnn_tmp_create)
 * and flushes and closes it (clcnn_tmp_close, `shared` as there). *tmp receives its name
 * (malloc'd; the caller frees it after clcnn_tmp_rename, or after removing the file). On
 * failure *tmp is NULL and nothing is left on disk. */
clcnn_status clcnn_write_tmp(const char *path, const clcnn_piece *pieces, int n, int shared,
                             char **tmp, clcnn_error *e);

/* Writes size bytes to path atomically: clcnn_write_tmp, then clcnn_tmp_rename. */
clcnn_status clcnn_write_file_atomic(const char *path, const void *data, size_t size, int shared,
                                     clcnn_error *e);

/* Creates dir and its missing parents (mkdir -p) with the given mode for what it creates. A
 * component that exists must be a directory (or a link to one); one that exists in a folder
 * this process may not write to is accepted too. */
clcnn_status clcnn_mkdir_p(const char *dir, unsigned mode, clcnn_error *e);

/* Creates a private folder (mode 0700 for what is created) and checks that it is one this
 * process may trust: a folder owned by the effective user. Returns 0 when it is. */
int clcnn_private_dir(const char *dir);

/* Opens path for reading when it is a regular file owned by the effective user (not through
 * a symbolic link, never blocking on a FIFO); -1 otherwise. */
int clcnn_open_owned(const char *path);

#endif
