/* Temporary files, their sweep, atomic replaces and private cache folders (see files.h). */
#include "files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

/* Six characters that make a temporary name unguessable enough that another user cannot take
 * it first (O_EXCL would only make the save fail, but it should not fail). */
static void random_suffix(char out[7], unsigned attempt) {
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t seed[4] = {(uint64_t)ts.tv_sec, (uint64_t)ts.tv_nsec, (uint64_t)getpid(), attempt};
    uint64_t h = XXH64(seed, sizeof seed, (uint64_t)(uintptr_t)out);
    for (int i = 0; i < 6; i++, h /= 36)
        out[i] = alphabet[h % 36];
    out[6] = '\0';
}

clcnn_status clcnn_tmp_create(const char *path, char **tmp_out, int *fd_out, clcnn_error *e) {
    size_t len = strlen(path) + 48;
    char *tmp = malloc(len);
    *tmp_out = NULL;
    *fd_out = -1;
    if (!tmp) return clcnn_fail(e, CLCNN_ERR_OUT_OF_HOST_MEMORY, "%s: out of memory", path);
    for (unsigned attempt = 0; attempt < 64; attempt++) {
        char suffix[7];
        random_suffix(suffix, attempt);
        snprintf(tmp, len, "%s.tmp.%ld.%s", path, (long)getpid(), suffix);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0) {
            *tmp_out = tmp;
            *fd_out = fd;
            return CLCNN_SUCCESS;
        }
        if (errno != EEXIST) {
            clcnn_status st =
                clcnn_fail(e, CLCNN_ERR_IO, "%s: cannot create %s: %s", path, tmp, strerror(errno));
            free(tmp);
            return st;
        }
    }
    free(tmp);
    return clcnn_fail(e, CLCNN_ERR_IO, "%s: cannot create a temporary file beside it", path);
}

/* The pid in "<pid>" or "<pid>.<6 characters>" (what follows "<file>.tmp."), or 0. */
static long tmp_owner(const char *rest) {
    char *end = NULL;
    errno = 0;
    long pid = strtol(rest, &end, 10);
    if (errno || end == rest || pid <= 0 || rest[0] < '0' || rest[0] > '9') return 0;
    if (*end == '\0') return pid;
    if (*end != '.' || strlen(end + 1) != 6) return 0;
    for (const char *c = end + 1; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9'))) return 0;
    return pid;
}

void clcnn_tmp_sweep(const char *dir, const char *suffix) {
    size_t slen = strlen(suffix);
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *n = de->d_name, *t = NULL;
        for (const char *q = strstr(n, ".tmp."); q; q = strstr(q + 1, ".tmp."))
            t = q;
        if (!t || (size_t)(t - n) < slen || strncmp(t - slen, suffix, slen) != 0) continue;
        long pid = tmp_owner(t + 5);
        if (!pid || pid == (long)getpid()) continue;
        /* Another user's process shows as EPERM: alive as far as we can tell. */
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        char full[4400];
        struct stat sb;
        snprintf(full, sizeof full, "%s/%s", dir, n);
        if (lstat(full, &sb) == 0 && !S_ISDIR(sb.st_mode)) unlink(full);
    }
    closedir(d);
}

/* The mode a file created with 0666 gets under this process's umask. Read from /proc (umask()
 * itself would have to change it, racing other threads); 0644 where /proc cannot tell. */
static mode_t shared_mode(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[128];
    unsigned mask = 022;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Umask: %o", &mask) == 1) break;
    if (f) fclose(f);
    return (mode_t)(0666 & ~mask);
}

/* Makes the rename itself durable. Best effort: some filesystems refuse fsync on a directory,
 * and the data is already safe in the file by then. */
static void sync_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    char dir[4096] = ".";
    if (slash) {
        size_t len = slash == path ? 1 : (size_t)(slash - path);
        if (len >= sizeof dir) return;
        memcpy(dir, path, len);
        dir[len] = '\0';
    }
    int fd = open(dir, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

clcnn_status clcnn_tmp_close(int fd, const char *tmp, const char *path, int shared,
                             clcnn_error *e) {
    int err = 0;
    if (fsync(fd) != 0) err = errno;
    if (!err && shared && fchmod(fd, shared_mode()) != 0) err = errno;
    if (close(fd) != 0 && !err) err = errno;
    if (err) {
        unlink(tmp);
        return clcnn_fail(e, CLCNN_ERR_IO, "%s: writing %s failed: %s", path, tmp, strerror(err));
    }
    return CLCNN_SUCCESS;
}

clcnn_status clcnn_tmp_rename(const char *tmp, const char *path, clcnn_error *e) {
    if (rename(tmp, path) != 0) {
        clcnn_status st = clcnn_fail(e, CLCNN_ERR_IO, "%s: cannot rename %s over it: %s", path, tmp,
                                     strerror(errno));
        unlink(tmp);
        return st;
    }
    sync_dir(path);
    return CLCNN_SUCCESS;
}

/* Writes all of buf to fd, resuming after short writes and signals; 0 or an errno. */
static int write_all(int fd, const void *buf, size_t size) {
    const unsigned char *p = buf;
    size_t done = 0;
    while (done < size) {
        ssize_t k = write(fd, p + done, size - done);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return k < 0 ? errno : EIO;
        done += (size_t)k;
    }
    return 0;
}

clcnn_status clcnn_write_tmp(const char *path, const clcnn_piece *pieces, int n, int shared,
                             char **tmp_out, clcnn_error *e) {
    char *tmp = NULL;
    int fd = -1, err = 0;
    *tmp_out = NULL;
    clcnn_status st = clcnn_tmp_create(path, &tmp, &fd, e);
    if (st) return st;
    for (int i = 0; i < n && !err; i++)
        if (pieces[i].size) err = write_all(fd, pieces[i].data, pieces[i].size);
    if (err) {
        st = clcnn_fail(e, CLCNN_ERR_IO, "%s: writing %s failed: %s", path, tmp, strerror(err));
        close(fd);
        unlink(tmp);
        free(tmp);
        return st;
    }
    if ((st = clcnn_tmp_close(fd, tmp, path, shared, e))) {
        free(tmp);
        return st;
    }
    *tmp_out = tmp;
    return CLCNN_SUCCESS;
}

clcnn_status clcnn_write_file_atomic(const char *path, const void *data, size_t size, int shared,
                                     clcnn_error *e) {
    clcnn_piece piece = {data, size};
    char *tmp = NULL;
    clcnn_status st = clcnn_write_tmp(path, &piece, 1, shared, &tmp, e);
    if (!st) st = clcnn_tmp_rename(tmp, path, e);
    free(tmp);
    return st;
}

clcnn_status clcnn_mkdir_p(const char *dir, unsigned mode, clcnn_error *e) {
    clcnn_status st = CLCNN_SUCCESS;
    if (!dir || !*dir) return clcnn_fail(e, CLCNN_ERR_IO, "empty directory name");
    char *p = strdup(dir);
    if (!p) return clcnn_fail(e, CLCNN_ERR_OUT_OF_HOST_MEMORY, "%s: out of memory", dir);
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0') continue;
        char c = *s;
        *s = '\0';
        if (mkdir(p, (mode_t)mode) != 0) {
            /* mkdir reports EEXIST, or EACCES/EROFS in a read-only parent, for a component
             * that exists; only a directory that is really there lets us go on. */
            int err = errno;
            struct stat sb;
            if (stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
                if (err == EEXIST) err = ENOTDIR;
                st =
                    clcnn_fail(e, CLCNN_ERR_IO, "cannot create directory %s: %s", p, strerror(err));
                break;
            }
        }
        *s = c;
        if (c == '\0') break;
    }
    free(p);
    return st;
}

int clcnn_private_dir(const char *dir) {
    struct stat sb;
    if (clcnn_mkdir_p(dir, 0700, NULL) != CLCNN_SUCCESS) return -1;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode) || sb.st_uid != geteuid()) return -1;
    return 0;
}

int clcnn_open_owned(const char *path) {
    struct stat sb;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -1;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_uid != geteuid()) {
        close(fd);
        return -1;
    }
    return fd;
}
