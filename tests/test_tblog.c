/* Tests for the TensorBoard event-file writer: CRC-32C vectors, then files written by the
 * library, read back with an independent TFRecord parser and protobuf decoder.
 * CLCNN_TBLOG_KEEP=dir also leaves a file with fixed scalars in dir for check_tensorboard.py. */
#define _XOPEN_SOURCE 700

#include "tblog.h"

#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* Like CHECK for a status, printing the library's message when it is not the expected one. */
#define CHECK_ST(call, want, err)                                                                  \
    do {                                                                                           \
        clcnn_status st_ = (call);                                                                 \
        if (st_ != (want)) {                                                                       \
            fprintf(stderr, "%s:%d: %s returned %s, want %s (%s)\n", __FILE__, __LINE__, #call,    \
                    clcnn_status_str(st_), clcnn_status_str(want), (err).msg);                     \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* ------------------------------------------------------------------------------------------ */
/* An independent reader: TFRecord framing and just enough protobuf for tensorflow.Event.      */

#define MAX_EVENTS 64

typedef struct event {
    int has_wall_time, has_step, has_version, has_summary, n_values, has_simple_value;
    double wall_time;
    int64_t step;
    char version[64];
    char tag[512];
    float simple_value;
} event;

typedef struct reader {
    const unsigned char *p, *end;
} reader;

static int get_varint(reader *r, uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end) return -1;
        unsigned char b = *r->p++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return 0;
    }
    return -1;
}

static uint64_t get_le(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Reads one field key and, for length-delimited fields, the bounds of its bytes. */
static int get_field(reader *r, int *field, int *wire, reader *sub) {
    uint64_t key, n;
    if (get_varint(r, &key)) return -1;
    *field = (int)(key >> 3);
    *wire = (int)(key & 7);
    int size = *wire == 0 ? 0 : *wire == 1 ? 8 : *wire == 5 ? 4 : -1;
    if (*wire == 2) {
        if (get_varint(r, &n) || n > (uint64_t)(r->end - r->p)) return -1;
        size = (int)n;
    }
    if (size < 0 || (*wire != 0 && size > r->end - r->p)) return -1;
    sub->p = r->p;
    sub->end = *wire == 0 ? r->p : r->p + size;
    if (*wire != 0) r->p += size;
    return 0;
}

static int copy_string(char *dst, size_t size, const reader *s) {
    size_t n = (size_t)(s->end - s->p);
    if (n >= size) return -1;
    memcpy(dst, s->p, n);
    dst[n] = '\0';
    return 0;
}

/* Summary.Value{tag = 1, simple_value = 2}; any other field is a failure: we wrote none. */
static int decode_value(reader r, event *ev) {
    int field, wire;
    reader s;
    while (r.p < r.end) {
        if (get_field(&r, &field, &wire, &s)) return -1;
        if (field == 1 && wire == 2) {
            if (copy_string(ev->tag, sizeof ev->tag, &s)) return -1;
        } else if (field == 2 && wire == 5) {
            uint32_t bits = (uint32_t)get_le(s.p, 4);
            memcpy(&ev->simple_value, &bits, 4);
            ev->has_simple_value = 1;
        } else {
            return -1;
        }
    }
    return 0;
}

static int decode_event(reader r, event *ev) {
    int field, wire;
    reader s;
    memset(ev, 0, sizeof *ev);
    while (r.p < r.end) {
        if (get_field(&r, &field, &wire, &s)) return -1;
        if (field == 1 && wire == 1) {
            uint64_t bits = get_le(s.p, 8);
            memcpy(&ev->wall_time, &bits, 8);
            ev->has_wall_time = 1;
        } else if (field == 2 && wire == 0) {
            uint64_t v;
            if (get_varint(&r, &v)) return -1;
            ev->step = (int64_t)v;
            ev->has_step = 1;
        } else if (field == 3 && wire == 2) {
            if (copy_string(ev->version, sizeof ev->version, &s)) return -1;
            ev->has_version = 1;
        } else if (field == 5 && wire == 2) {
            ev->has_summary = 1;
            while (s.p < s.end) { /* Summary{repeated value = 1} */
                reader v;
                if (get_field(&s, &field, &wire, &v) || field != 1 || wire != 2) return -1;
                if (decode_value(v, ev)) return -1;
                ev->n_values++;
            }
        } else {
            return -1;
        }
    }
    return 0;
}

static uint32_t masked(uint32_t crc) {
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

/* Parses every record of the file at path, checking both CRCs of each; returns the number of
 * events, or -1 (after printing why) on any framing, CRC or decoding error. */
static int read_events(const char *path, event *evs, int max) {
    int n = -1;
    unsigned char *data = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "read_events: %s: %s\n", path, strerror(errno));
        return -1;
    }
    long size = (fseek(f, 0, SEEK_END) == 0) ? ftell(f) : -1;
    rewind(f);
    data = malloc(size > 0 ? (size_t)size : 1);
    if (size < 0 || !data || fread(data, 1, (size_t)size, f) != (size_t)size) {
        fprintf(stderr, "read_events: %s: cannot read\n", path);
        goto done;
    }
    const unsigned char *p = data, *end = data + size;
    int count = 0;
    while (p < end) {
        if (end - p < 12 || count == max) {
            fprintf(stderr, "read_events: %s: record %d: truncated header\n", path, count);
            goto done;
        }
        uint64_t len = get_le(p, 8);
        if ((uint32_t)get_le(p + 8, 4) != masked(clcnn_crc32c(0, p, 8))) {
            fprintf(stderr, "read_events: %s: record %d: bad length CRC\n", path, count);
            goto done;
        }
        if (end - p < 16 || len > (uint64_t)(end - p - 16)) {
            fprintf(stderr, "read_events: %s: record %d: truncated payload\n", path, count);
            goto done;
        }
        const unsigned char *payload = p + 12;
        if ((uint32_t)get_le(payload + len, 4) != masked(clcnn_crc32c(0, payload, len))) {
            fprintf(stderr, "read_events: %s: record %d: bad payload CRC\n", path, count);
            goto done;
        }
        reader r = {payload, payload + len};
        if (decode_event(r, &evs[count])) {
            fprintf(stderr, "read_events: %s: record %d: bad protobuf\n", path, count);
            goto done;
        }
        count++;
        p = payload + len + 4;
    }
    n = count;
done:
    free(data);
    fclose(f);
    return n;
}

/* ------------------------------------------------------------------------------------------ */

static int same_bits(float a, float b) {
    return memcmp(&a, &b, sizeof a) == 0;
}

static void check_scalar(const event *ev, const char *tag, float value, int64_t step, double wt) {
    CHECK(ev->has_wall_time && ev->wall_time == wt);
    CHECK(ev->has_step && ev->step == step);
    CHECK(!ev->has_version);
    CHECK(ev->has_summary && ev->n_values == 1);
    CHECK(strcmp(ev->tag, tag) == 0);
    CHECK(ev->has_simple_value && same_bits(ev->simple_value, value));
}

static void check_crc(void) {
    unsigned char buf[32];
    CHECK(clcnn_crc32c(0, "123456789", 9) == 0xE3069283u);
    CHECK(clcnn_crc32c(0, "", 0) == 0);
    /* RFC 3720 (iSCSI) B.4 vectors. */
    memset(buf, 0, sizeof buf);
    CHECK(clcnn_crc32c(0, buf, sizeof buf) == 0x8A9136AAu);
    memset(buf, 0xff, sizeof buf);
    CHECK(clcnn_crc32c(0, buf, sizeof buf) == 0x62A8AB43u);
    for (int i = 0; i < 32; i++)
        buf[i] = (unsigned char)i;
    CHECK(clcnn_crc32c(0, buf, sizeof buf) == 0x46DD794Eu);
    for (int i = 0; i < 32; i++)
        buf[i] = (unsigned char)(31 - i);
    CHECK(clcnn_crc32c(0, buf, sizeof buf) == 0x113FDB5Cu);
    /* Feeding in pieces gives the CRC of the whole. */
    CHECK(clcnn_crc32c(clcnn_crc32c(0, "1234", 4), "56789", 5) == 0xE3069283u);
}

static int rm_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
    (void)sb;
    (void)type;
    (void)ftw;
    return remove(path);
}

static char *join(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s/%s", a, b);
    return s;
}

static long file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

static const char *long_tag(void) {
    /* 200 bytes: its length needs a two-byte varint. */
    static char tag[201];
    for (int i = 0; i < 200; i++)
        tag[i] = (char)('a' + i % 26);
    tag[200] = '\0';
    return tag;
}

static void check_roundtrip_events(const char *path) {
    event evs[MAX_EVENTS];
    int n = read_events(path, evs, MAX_EVENTS);
    CHECK(n == 5);
    if (n != 5) return;
    check_scalar(&evs[1], "train_loss", 2.302585f, 1, 1700000000.25);
    check_scalar(&evs[2], "test_loss", 0.1f, 0, 1700000001.5);
    check_scalar(&evs[3], long_tag(), -0.0f, -1, 0.0);
    check_scalar(&evs[4], "big/step", (float)NAN, (int64_t)1 << 40, 1.0e10);
}

/* Writes scalars into a nested, not yet existing logdir; reads them back before and after
 * close, since each record must reach the OS before clcnn_tblog_scalar returns. */
static void check_roundtrip(const char *tmp) {
    clcnn_error e = {0};
    clcnn_tblog *tb = NULL;
    event evs[MAX_EVENTS];
    char *logdir = join(tmp, "runs/a/b/"); /* trailing slash on purpose */
    CHECK(logdir != NULL);
    if (!logdir) return;
    /* clock_gettime, as the library uses: time() may read a coarser clock a tick behind. */
    struct timespec t0, t1;
    clock_gettime(CLOCK_REALTIME, &t0);
    CHECK_ST(clcnn_tblog_open(&tb, logdir, &e), CLCNN_SUCCESS, e);
    clock_gettime(CLOCK_REALTIME, &t1);
    if (!tb) goto done;

    const char *path = clcnn_tblog_path(tb);
    char prefix[4096];
    snprintf(prefix, sizeof prefix, "%sevents.out.tfevents.", logdir);
    CHECK(strncmp(path, prefix, strlen(prefix)) == 0);
    const char *stamp = path + strlen(prefix);
    CHECK(strlen(stamp) > 12 && stamp[10] == '.' && strspn(stamp, "0123456789") == 10);
    long long secs = atoll(stamp);
    CHECK(secs >= (long long)t0.tv_sec && secs <= (long long)t1.tv_sec);

    CHECK(read_events(path, evs, MAX_EVENTS) == 1);
    CHECK(evs[0].has_version && strcmp(evs[0].version, "brain.Event:2") == 0);
    CHECK(evs[0].has_wall_time && evs[0].wall_time >= (double)t0.tv_sec &&
          evs[0].wall_time < (double)t1.tv_sec + 1.0);
    CHECK(!evs[0].has_step && !evs[0].has_summary);

    CHECK_ST(clcnn_tblog_scalar(tb, "train_loss", 2.302585f, 1, 1700000000.25, &e), CLCNN_SUCCESS,
             e);
    CHECK_ST(clcnn_tblog_scalar(tb, "test_loss", 0.1f, 0, 1700000001.5, &e), CLCNN_SUCCESS, e);
    CHECK_ST(clcnn_tblog_scalar(tb, long_tag(), -0.0f, -1, 0.0, &e), CLCNN_SUCCESS, e);
    CHECK_ST(clcnn_tblog_scalar(tb, "big/step", (float)NAN, (int64_t)1 << 40, 1.0e10, &e),
             CLCNN_SUCCESS, e);
    CHECK_ST(clcnn_tblog_scalar(tb, "", 1.0f, 0, 0.0, &e), CLCNN_ERR_INVALID_ARGUMENT, e);
    CHECK_ST(clcnn_tblog_scalar(tb, NULL, 1.0f, 0, 0.0, &e), CLCNN_ERR_INVALID_ARGUMENT, e);

    check_roundtrip_events(path); /* still open: each record must already be in the file */
    char *saved = strdup(path);
    CHECK_ST(clcnn_tblog_close(tb, &e), CLCNN_SUCCESS, e);
    tb = NULL;
    if (saved) check_roundtrip_events(saved);
    free(saved);
done:
    CHECK_ST(clcnn_tblog_close(tb, &e), CLCNN_SUCCESS, e);
    free(logdir);
}

/* Opens within one second must not overwrite each other. The test cannot pin the clock, so it
 * plants decoys under the names of the next few seconds: whichever second the second open
 * lands in, its plain name is taken. */
static void check_unique_name(const char *tmp) {
    clcnn_error e = {0};
    clcnn_tblog *a = NULL, *b = NULL;
    event evs[MAX_EVENTS];
    char *logdir = join(tmp, "unique");
    CHECK(logdir != NULL);
    if (!logdir) return;
    CHECK_ST(clcnn_tblog_open(&a, logdir, &e), CLCNN_SUCCESS, e);
    if (!a) goto done;
    CHECK_ST(clcnn_tblog_scalar(a, "x", 1.0f, 1, 1.0, &e), CLCNN_SUCCESS, e);

    const char *pa = clcnn_tblog_path(a);
    const char *stamp = strstr(pa, "tfevents.") + strlen("tfevents.");
    long long secs = atoll(stamp);
    const char *host = stamp + 11;
    char decoy[4096];
    for (int k = 1; k <= 5; k++) {
        snprintf(decoy, sizeof decoy, "%s/events.out.tfevents.%010lld.%s", logdir, secs + k, host);
        FILE *f = fopen(decoy, "wb");
        CHECK(f != NULL);
        if (f) {
            fputs("decoy", f);
            fclose(f);
        }
    }

    CHECK_ST(clcnn_tblog_open(&b, logdir, &e), CLCNN_SUCCESS, e);
    if (!b) goto done;
    const char *pb = clcnn_tblog_path(b);
    size_t lb = strlen(pb);
    CHECK(strcmp(pa, pb) != 0);
    CHECK(lb > 2 && strcmp(pb + lb - 2, ".1") == 0);
    CHECK_ST(clcnn_tblog_scalar(b, "y", 2.0f, 2, 2.0, &e), CLCNN_SUCCESS, e);

    CHECK(read_events(pa, evs, MAX_EVENTS) == 2);
    check_scalar(&evs[1], "x", 1.0f, 1, 1.0);
    CHECK(read_events(pb, evs, MAX_EVENTS) == 2);
    check_scalar(&evs[1], "y", 2.0f, 2, 2.0);
    for (int k = 1; k <= 5; k++) {
        snprintf(decoy, sizeof decoy, "%s/events.out.tfevents.%010lld.%s", logdir, secs + k, host);
        CHECK(file_size(decoy) == 5);
    }
done:
    CHECK_ST(clcnn_tblog_close(a, &e), CLCNN_SUCCESS, e);
    CHECK_ST(clcnn_tblog_close(b, &e), CLCNN_SUCCESS, e);
    free(logdir);
}

/* A logdir that cannot be a directory: the status is CLCNN_ERR_IO and the message names it. */
static void check_bad_logdir(const char *tmp) {
    clcnn_error e = {0};
    clcnn_tblog *tb = (clcnn_tblog *)&e; /* must be reset to NULL on failure */
    char *file = join(tmp, "regular");
    char *under = file ? join(file, "sub/dir") : NULL;
    CHECK(file && under);
    if (!file || !under) goto done;
    FILE *f = fopen(file, "wb");
    CHECK(f != NULL);
    if (f) fclose(f);

    CHECK_ST(clcnn_tblog_open(&tb, under, &e), CLCNN_ERR_IO, e);
    CHECK(tb == NULL);
    CHECK(strstr(e.msg, file) != NULL);
    CHECK(strstr(e.msg, "Not a directory") != NULL);

    e.msg[0] = '\0';
    tb = (clcnn_tblog *)&e;
    CHECK_ST(clcnn_tblog_open(&tb, file, &e), CLCNN_ERR_IO, e);
    CHECK(tb == NULL);
    CHECK(strstr(e.msg, file) != NULL);

    CHECK_ST(clcnn_tblog_open(&tb, "", &e), CLCNN_ERR_INVALID_ARGUMENT, e);
    CHECK_ST(clcnn_tblog_open(&tb, NULL, &e), CLCNN_ERR_INVALID_ARGUMENT, e);
    CHECK_ST(clcnn_tblog_open(NULL, tmp, &e), CLCNN_ERR_INVALID_ARGUMENT, e);
    CHECK_ST(clcnn_tblog_scalar(NULL, "x", 1.0f, 0, 0.0, &e), CLCNN_ERR_INVALID_ARGUMENT, e);
    CHECK_ST(clcnn_tblog_close(NULL, &e), CLCNN_SUCCESS, e);
    CHECK(clcnn_tblog_path(NULL) == NULL);
done:
    free(under);
    free(file);
}

/* A write that fails (here: the file-size limit, as a full disk would) is reported, later
 * writes refuse to append after it, and the records before it stay readable. */
static void check_write_error(const char *tmp) {
    clcnn_error e = {0};
    clcnn_tblog *tb = NULL;
    event evs[MAX_EVENTS];
    struct rlimit saved, lim;
    char *logdir = join(tmp, "full");
    CHECK(logdir != NULL);
    if (!logdir) return;
    CHECK_ST(clcnn_tblog_open(&tb, logdir, &e), CLCNN_SUCCESS, e);
    if (!tb) goto done;
    CHECK_ST(clcnn_tblog_scalar(tb, "ok", 3.0f, 7, 7.0, &e), CLCNN_SUCCESS, e);
    long size = file_size(clcnn_tblog_path(tb));
    CHECK(size > 0);

    if (getrlimit(RLIMIT_FSIZE, &saved) != 0 ||
        (saved.rlim_cur != RLIM_INFINITY && saved.rlim_cur <= (rlim_t)size)) {
        printf("test_tblog: write-error check skipped (cannot lower RLIMIT_FSIZE)\n");
        goto done;
    }
    signal(SIGXFSZ, SIG_IGN); /* get EFBIG from write() instead of being killed */
    lim = saved;
    lim.rlim_cur = (rlim_t)size;
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    CHECK_ST(clcnn_tblog_scalar(tb, "lost", 4.0f, 8, 8.0, &e), CLCNN_ERR_IO, e);
    CHECK(strstr(e.msg, clcnn_tblog_path(tb)) != NULL);
    CHECK_ST(clcnn_tblog_scalar(tb, "lost", 5.0f, 9, 9.0, &e), CLCNN_ERR_IO, e);
    CHECK(strstr(e.msg, "earlier write failed") != NULL);

    char *path = strdup(clcnn_tblog_path(tb));
    CHECK_ST(clcnn_tblog_close(tb, &e), CLCNN_ERR_IO, e);
    tb = NULL;
    CHECK(setrlimit(RLIMIT_FSIZE, &saved) == 0);
    signal(SIGXFSZ, SIG_DFL);
    if (path) {
        CHECK(file_size(path) == size);
        CHECK(read_events(path, evs, MAX_EVENTS) == 2);
        check_scalar(&evs[1], "ok", 3.0f, 7, 7.0);
        free(path);
    }
done:
    clcnn_tblog_close(tb, NULL);
    free(logdir);
}

/* A write that fails part-way (the file-size limit five bytes past the last whole record, as
 * a disk with a few bytes left) leaves no partial record: the file is cut back to the whole
 * records before it, so a reader sees every one of them and nothing after. */
static void check_partial_write(const char *tmp) {
    clcnn_error e = {0};
    clcnn_tblog *tb = NULL;
    event evs[MAX_EVENTS];
    struct rlimit saved, lim;
    char *logdir = join(tmp, "partial");
    CHECK(logdir != NULL);
    if (!logdir) return;
    CHECK_ST(clcnn_tblog_open(&tb, logdir, &e), CLCNN_SUCCESS, e);
    if (!tb) goto done;
    CHECK_ST(clcnn_tblog_scalar(tb, "ok", 3.0f, 7, 7.0, &e), CLCNN_SUCCESS, e);
    long size = file_size(clcnn_tblog_path(tb));
    CHECK(size > 0);
    if (getrlimit(RLIMIT_FSIZE, &saved) != 0 ||
        (saved.rlim_cur != RLIM_INFINITY && saved.rlim_cur <= (rlim_t)size + 5)) {
        printf("test_tblog: partial-write check skipped (cannot lower RLIMIT_FSIZE)\n");
        goto done;
    }
    signal(SIGXFSZ, SIG_IGN);
    lim = saved;
    lim.rlim_cur = (rlim_t)size + 5;
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    CHECK_ST(clcnn_tblog_scalar(tb, "torn", 4.0f, 8, 8.0, &e), CLCNN_ERR_IO, e);
    CHECK(file_size(clcnn_tblog_path(tb)) == size);
    char *path = strdup(clcnn_tblog_path(tb));
    CHECK_ST(clcnn_tblog_close(tb, &e), CLCNN_ERR_IO, e);
    tb = NULL;
    CHECK(setrlimit(RLIMIT_FSIZE, &saved) == 0);
    signal(SIGXFSZ, SIG_DFL);
    if (path) {
        CHECK(file_size(path) == size);
        CHECK(read_events(path, evs, MAX_EVENTS) == 2);
        check_scalar(&evs[1], "ok", 3.0f, 7, 7.0);
        free(path);
    }
done:
    clcnn_tblog_close(tb, NULL);
    free(logdir);
}

/* The file check_tensorboard.py reads; keep these values in step with the ctest that runs it. */
static int write_kept_file(const char *dir) {
    static const struct {
        const char *tag;
        int64_t step;
        float value;
    } rows[] = {
        {"train_loss", 1, 2.302585f}, {"train_loss", 2, 1.5f},       {"train_loss", 3, 0.6931472f},
        {"test_loss", 3, 0.75f},      {"test_accuracy", 3, 0.9123f},
    };
    clcnn_error e = {0};
    clcnn_tblog *tb = NULL;
    clcnn_status st = clcnn_tblog_open(&tb, dir, &e);
    for (size_t i = 0; st == CLCNN_SUCCESS && i < sizeof rows / sizeof rows[0]; i++)
        st = clcnn_tblog_scalar(tb, rows[i].tag, rows[i].value, rows[i].step,
                                1700000000.0 + (double)rows[i].step, &e);
    if (st == CLCNN_SUCCESS) printf("test_tblog: kept %s\n", clcnn_tblog_path(tb));
    clcnn_status cst = clcnn_tblog_close(tb, st == CLCNN_SUCCESS ? &e : NULL);
    if (st == CLCNN_SUCCESS) st = cst;
    if (st != CLCNN_SUCCESS) {
        fprintf(stderr, "test_tblog: CLCNN_TBLOG_KEEP=%s: %s: %s\n", dir, clcnn_status_str(st),
                e.msg);
        return 1;
    }
    return 0;
}

int main(void) {
    char tmpl[] = "/tmp/test_tblog.XXXXXX";
    char *tmp = mkdtemp(tmpl);
    if (!tmp) {
        fprintf(stderr, "test_tblog: mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    check_crc();
    check_roundtrip(tmp);
    check_unique_name(tmp);
    check_bad_logdir(tmp);
    check_write_error(tmp);
    check_partial_write(tmp);
    nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);

    const char *keep = getenv("CLCNN_TBLOG_KEEP");
    if (keep && *keep && write_kept_file(keep)) failures++;

    if (failures) {
        fprintf(stderr, "test_tblog: %d check(s) failed\n", failures);
        return 1;
    }
    printf("test_tblog: all checks passed\n");
    return 0;
}
