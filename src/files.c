/* Temporary files, their sweep, atomic replaces and private cache folders (see files.h). */
#include "files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
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

/* The lock that marks a temporary file as being written. flock, not fcntl: an flock lock
 * belongs to the open file, so it conflicts with a sweeper in the same process (another
 * thread) too and survives the closing of other descriptors of the file; over NFS Linux
 * passes it to the server as a whole-file lock, which needs the file open for writing (the
 * writer's descriptor is, the sweeper's too). 0, or an errno. */
static int lock_file(int fd, int op) {
    while (flock(fd, op) != 0)
        if (errno != EINTR) return errno;
    return 0;
}

clcnn_status clcnn_tmp_create(const char *path, clcnn_tmpfile *t, clcnn_error *e) {
    size_t len = strlen(path) + 48;
    char *tmp = malloc(len);
    t->name = NULL;
    t->fd = -1;
    if (!tmp) return clcnn_fail(e, CLCNN_ERR_OUT_OF_HOST_MEMORY, "%s: out of memory", path);
    for (unsigned attempt = 0; attempt < 64; attempt++) {
        char suffix[7];
        struct stat sb;
        random_suffix(suffix, attempt);
        snprintf(tmp, len, "%s.tmp.%ld.%s", path, (long)getpid(), suffix);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) {
            if (errno == EEXIST) continue;
            clcnn_status st =
                clcnn_fail(e, CLCNN_ERR_IO, "%s: cannot create %s: %s", path, tmp, strerror(errno));
            free(tmp);
            return st;
        }
        /* Locked at once and held until the rename: a sweep deletes only files it can lock
         * (and none this young). Should a sweep hold this file's lock all the same, or have
         * removed it already (nlink 0), start again under a new name. A filesystem without
         * locks (ENOLCK, EOPNOTSUPP) still gets its save: its sweeps can lock nothing either,
         * so they remove nothing. */
        int lk = lock_file(fd, LOCK_EX | LOCK_NB);
        if (lk == EWOULDBLOCK || (lk == 0 && fstat(fd, &sb) == 0 && sb.st_nlink == 0)) {
            if (lk) unlink(tmp);
            close(fd);
            continue;
        }
        t->name = tmp;
        t->fd = fd;
        return CLCNN_SUCCESS;
    }
    free(tmp);
    return clcnn_fail(e, CLCNN_ERR_IO, "%s: cannot create a temporary file beside it", path);
}

/* Whether what follows "<file>.tmp." is "<pid>" or "<pid>.<6 characters>", the names
 * clcnn_tmp_create gives (and older versions gave). */
static int tmp_shaped(const char *rest) {
    char *end = NULL;
    errno = 0;
    long pid = strtol(rest, &end, 10);
    if (errno || end == rest || pid <= 0 || rest[0] < '0' || rest[0] > '9') return 0;
    if (*end == '\0') return 1;
    if (*end != '.' || strlen(end + 1) != 6) return 0;
    for (const char *c = end + 1; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9'))) return 0;
    return 1;
}

/* Removes the temporary file `full` when nothing proves that a process is still writing it.
 * The pid in its name proves nothing either way: a writer in another PID namespace (a
 * container) or on another host sharing the folder has a pid this process cannot see, and
 * pids are reused. What proves a live writer is its lock (clcnn_tmp_create): taken here
 * without waiting, it fails while any process that shares the kernel, or the NFS server, with
 * this one holds it. A file that cannot be opened for writing (another user's) is not ours to
 * judge. Files modified in the last CLCNN_TMP_SWEEP_AGE seconds are left too: a writer that
 * takes no lock (an older version, a folder on a filesystem without locks) is then safe
 * unless it has been silent that long. */
static void sweep_one(const char *full, time_t now) {
    struct stat sb, fsb;
    if (lstat(full, &sb) != 0 || S_ISDIR(sb.st_mode)) return;
    if (sb.st_mtime > now - CLCNN_TMP_SWEEP_AGE) return;
    if (!S_ISREG(sb.st_mode)) { /* a link or the like: no writer ever writes through one */
        unlink(full);
        return;
    }
    int fd = open(full, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return;
    /* Same file as the one looked at, still linked: a writer that renamed it away (and let go
     * of the lock) or a sweep that got there first leaves nothing to remove. */
    if (lock_file(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &fsb) == 0 && S_ISREG(fsb.st_mode) &&
        fsb.st_nlink > 0 && lstat(full, &sb) == 0 && sb.st_dev == fsb.st_dev &&
        sb.st_ino == fsb.st_ino)
        unlink(full);
    close(fd);
}

void clcnn_tmp_sweep(const char *dir, const char *suffix) {
    size_t slen = strlen(suffix);
    time_t now = time(NULL);
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *n = de->d_name, *t = NULL;
        for (const char *q = strstr(n, ".tmp."); q; q = strstr(q + 1, ".tmp."))
            t = q;
        if (!t || (size_t)(t - n) < slen || strncmp(t - slen, suffix, slen) != 0) continue;
        if (!tmp_shaped(t + 5)) continue;
        char full[4400];
        if ((size_t)snprintf(full, sizeof full, "%s/%s", dir, n) >= sizeof full) continue;
        sweep_one(full, now);
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

void clcnn_tmp_discard(clcnn_tmpfile *t) {
    if (!t->name) return;
    unlink(t->name); /* before the close: the lock keeps sweeps off it until it is gone */
    if (t->fd >= 0) close(t->fd);
    free(t->name);
    t->name = NULL;
    t->fd = -1;
}

clcnn_status clcnn_tmp_finish(clcnn_tmpfile *t, const char *path, int shared, clcnn_error *e) {
    int err = 0;
    if (fsync(t->fd) != 0) err = errno;
    if (!err && shared && fchmod(t->fd, shared_mode()) != 0) err = errno;
    if (err) {
        clcnn_status st =
            clcnn_fail(e, CLCNN_ERR_IO, "%s: writing %s failed: %s", path, t->name, strerror(err));
        clcnn_tmp_discard(t);
        return st;
    }
    return CLCNN_SUCCESS;
}

clcnn_status clcnn_tmp_rename(clcnn_tmpfile *t, const char *path, clcnn_error *e) {
    if (rename(t->name, path) != 0) {
        clcnn_status st = clcnn_fail(e, CLCNN_ERR_IO, "%s: cannot rename %s over it: %s", path,
                                     t->name, strerror(errno));
        clcnn_tmp_discard(t);
        return st;
    }
    sync_dir(path);
    /* The data reached the disk with the fsync before the rename; closing only lets go of the
     * descriptor and of the lock, which the sweeps needed to see until the name was gone. */
    close(t->fd);
    free(t->name);
    t->name = NULL;
    t->fd = -1;
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
                             clcnn_tmpfile *t, clcnn_error *e) {
    int err = 0;
    clcnn_status st = clcnn_tmp_create(path, t, e);
    if (st) return st;
    for (int i = 0; i < n && !err; i++)
        if (pieces[i].size) err = write_all(t->fd, pieces[i].data, pieces[i].size);
    if (err) {
        st = clcnn_fail(e, CLCNN_ERR_IO, "%s: writing %s failed: %s", path, t->name, strerror(err));
        clcnn_tmp_discard(t);
        return st;
    }
    return clcnn_tmp_finish(t, path, shared, e);
}

clcnn_status clcnn_write_file_atomic(const char *path, const void *data, size_t size, int shared,
                                     clcnn_error *e) {
    clcnn_piece piece = {data, size};
    clcnn_tmpfile t;
    clcnn_status st = clcnn_write_tmp(path, &piece, 1, shared, &t, e);
    if (!st) st = clcnn_tmp_rename(&t, path, e);
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

int clcnn_private_dir_why(const char *dir, char *why, size_t why_size) {
    struct stat sb;
    clcnn_error e = {0};
    char dummy[1];
    if (!why) why = dummy, why_size = sizeof dummy;
    why[0] = '\0';
    if (clcnn_mkdir_p(dir, 0700, &e) != CLCNN_SUCCESS) {
        snprintf(why, why_size, "%s", e.msg);
        return -1;
    }
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        snprintf(why, why_size, "%s is not a folder", dir);
        return -1;
    }
    if (sb.st_uid != geteuid()) {
        snprintf(why, why_size, "%s belongs to uid %ld, not to this user (uid %ld)", dir,
                 (long)sb.st_uid, (long)geteuid());
        return -1;
    }
    /* Another user who may write into the folder may replace or remove our entries. */
    if (sb.st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(why, why_size, "%s is %s-writable (mode %03o; chmod go-w makes it private)", dir,
                 sb.st_mode & S_IWOTH ? "world" : "group", (unsigned)(sb.st_mode & 07777));
        return -1;
    }
    return 0;
}

int clcnn_private_dir(const char *dir) {
    return clcnn_private_dir_why(dir, NULL, 0);
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
