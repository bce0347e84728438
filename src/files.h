/* Files the library writes or trusts: temporary files that cannot be redirected by a planted
 * link, the sweep of temporary files a crashed process left behind, and private cache folders. */
#ifndef CLCNN_FILES_H
#define CLCNN_FILES_H

#include <stddef.h>

#include "common.h"

/* A temporary file being written: its name (malloc'd) and its descriptor, open for writing
 * and locked (flock, exclusive) from its creation until it is renamed or removed. name is
 * NULL when there is none. */
typedef struct clcnn_tmpfile {
    char *name;
    int fd;
} clcnn_tmpfile;

/* Seconds since its last change before a sweep may remove an unlocked temporary file: a writer
 * that takes no lock (an older clcnn, a filesystem without locks) is not caught mid-save. */
#define CLCNN_TMP_SWEEP_AGE 600

/* Creates a fresh temporary file beside `path` for an atomic replace: "<path>.tmp.<pid>.<six
 * random characters>", opened with O_CREAT | O_EXCL | O_NOFOLLOW and mode 0600, so an existing
 * file or a symbolic link planted under that name is never opened, and locked at once. */
clcnn_status clcnn_tmp_create(const char *path, clcnn_tmpfile *t, clcnn_error *e);

/* Removes what crashed processes left of their atomic replaces in folder `dir`: files
 * named "<name><suffix>.tmp.<pid>" or "<name><suffix>.tmp.<pid>.<random>" (suffix
 * ".safetensors" for checkpoints) that this process can lock, i.e. that no live process holds
 * (in any PID namespace on this kernel, or on any NFS client), and that have not changed for
 * CLCNN_TMP_SWEEP_AGE seconds; a link or other non-regular file under such a name goes after
 * that age too. The pid in a name is not trusted: it may be another namespace's, or reused.
 * Best effort: errors are ignored. */
void clcnn_tmp_sweep(const char *dir, const char *suffix);

/* Flushes t's file to disk and gives it the mode a new file would have (0666 less the umask)
 * when `shared`, else leaves it 0600; t stays open and locked. On failure t is removed
 * (clcnn_tmp_discard) and e names path. */
clcnn_status clcnn_tmp_finish(clcnn_tmpfile *t, const char *path, int shared, clcnn_error *e);

/* Renames a finished temporary file over path, syncs the folder, and closes it (the lock goes
 * with the descriptor, after the rename); on failure t is removed. Either way t is empty after. */
clcnn_status clcnn_tmp_rename(clcnn_tmpfile *t, const char *path, clcnn_error *e);

/* Removes t's file, closes it and frees the name; a no-op on an empty t. */
void clcnn_tmp_discard(clcnn_tmpfile *t);

/* One piece of a file: size bytes at data. */
typedef struct clcnn_piece {
    const void *data;
    size_t size;
} clcnn_piece;

/* The first half of an atomic replace, for callers that write several files before renaming
 * any: writes the n pieces in order to a fresh temporary file beside path (clcnn_tmp_create)
 * and flushes it (clcnn_tmp_finish, `shared` as there). *t then holds it, open and locked,
 * for clcnn_tmp_rename or clcnn_tmp_discard. On failure *t is empty and nothing is left on
 * disk. */
clcnn_status clcnn_write_tmp(const char *path, const clcnn_piece *pieces, int n, int shared,
                             clcnn_tmpfile *t, clcnn_error *e);

/* Writes size bytes to path atomically: clcnn_write_tmp, then clcnn_tmp_rename. */
clcnn_status clcnn_write_file_atomic(const char *path, const void *data, size_t size, int shared,
                                     clcnn_error *e);

/* Creates dir and its missing parents (mkdir -p) with the given mode for what it creates. A
 * component that exists must be a directory (or a link to one); one that exists in a folder
 * this process may not write to is accepted too. */
clcnn_status clcnn_mkdir_p(const char *dir, unsigned mode, clcnn_error *e);

/* Creates a private folder (mode 0700 for what is created) and checks that it is one this
 * process may trust: a folder owned by the effective user that neither group nor others may
 * write to. Returns 0 when it is. */
int clcnn_private_dir(const char *dir);

/* clcnn_private_dir, saying in why (why_size bytes; NULL for none) why a folder is refused: one
 * line naming the folder, "" when it is accepted. */
int clcnn_private_dir_why(const char *dir, char *why, size_t why_size);

/* Opens path for reading when it is a regular file owned by the effective user (not through
 * a symbolic link, never blocking on a FIFO); -1 otherwise. */
int clcnn_open_owned(const char *path);

#endif
