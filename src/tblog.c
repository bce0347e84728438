/* TensorBoard event files: TFRecord framing around hand-encoded tensorflow.Event protobufs.
 * Record: u64 length, u32 masked CRC-32C of the length, payload, u32 masked CRC-32C of it. */
#define _POSIX_C_SOURCE 200809L

#include "tblog.h"

#include "files.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The encoders copy the object representation of float and double into fixed32/fixed64. */
_Static_assert(sizeof(float) == 4 && sizeof(double) == 8, "IEEE-754 binary32/binary64 needed");

/* A tag this long is surely a bug in the caller; the bound also keeps size sums far from
 * overflow. */
#define MAX_TAG_BYTES 4096

/* TFRecord framing: 8 length bytes + 4 CRC bytes before the payload, 4 CRC bytes after it. */
#define HEADER_BYTES 12
#define TRAILER_BYTES 4

struct clcnn_tblog {
    int fd;
    off_t size; /* bytes of whole records in the file */
    char *path;
    unsigned char *buf; /* one whole record, reused across calls */
    size_t cap;
    int write_errno; /* errno of the first failed write, 0 when none */
};

/* CRC-32C table for the reflected polynomial 0x82F63B78: entry i is the CRC of byte i. Spelled
 * out rather than built on first use so that concurrent first calls need no synchronisation. */
static const uint32_t crc32c_table[256] = {
    0x00000000, 0xf26b8303, 0xe13b70f7, 0x1350f3f4, 0xc79a971f, 0x35f1141c, 0x26a1e7e8, 0xd4ca64eb,
    0x8ad958cf, 0x78b2dbcc, 0x6be22838, 0x9989ab3b, 0x4d43cfd0, 0xbf284cd3, 0xac78bf27, 0x5e133c24,
    0x105ec76f, 0xe235446c, 0xf165b798, 0x030e349b, 0xd7c45070, 0x25afd373, 0x36ff2087, 0xc494a384,
    0x9a879fa0, 0x68ec1ca3, 0x7bbcef57, 0x89d76c54, 0x5d1d08bf, 0xaf768bbc, 0xbc267848, 0x4e4dfb4b,
    0x20bd8ede, 0xd2d60ddd, 0xc186fe29, 0x33ed7d2a, 0xe72719c1, 0x154c9ac2, 0x061c6936, 0xf477ea35,
    0xaa64d611, 0x580f5512, 0x4b5fa6e6, 0xb93425e5, 0x6dfe410e, 0x9f95c20d, 0x8cc531f9, 0x7eaeb2fa,
    0x30e349b1, 0xc288cab2, 0xd1d83946, 0x23b3ba45, 0xf779deae, 0x05125dad, 0x1642ae59, 0xe4292d5a,
    0xba3a117e, 0x4851927d, 0x5b016189, 0xa96ae28a, 0x7da08661, 0x8fcb0562, 0x9c9bf696, 0x6ef07595,
    0x417b1dbc, 0xb3109ebf, 0xa0406d4b, 0x522bee48, 0x86e18aa3, 0x748a09a0, 0x67dafa54, 0x95b17957,
    0xcba24573, 0x39c9c670, 0x2a993584, 0xd8f2b687, 0x0c38d26c, 0xfe53516f, 0xed03a29b, 0x1f682198,
    0x5125dad3, 0xa34e59d0, 0xb01eaa24, 0x42752927, 0x96bf4dcc, 0x64d4cecf, 0x77843d3b, 0x85efbe38,
    0xdbfc821c, 0x2997011f, 0x3ac7f2eb, 0xc8ac71e8, 0x1c661503, 0xee0d9600, 0xfd5d65f4, 0x0f36e6f7,
    0x61c69362, 0x93ad1061, 0x80fde395, 0x72966096, 0xa65c047d, 0x5437877e, 0x4767748a, 0xb50cf789,
    0xeb1fcbad, 0x197448ae, 0x0a24bb5a, 0xf84f3859, 0x2c855cb2, 0xdeeedfb1, 0xcdbe2c45, 0x3fd5af46,
    0x7198540d, 0x83f3d70e, 0x90a324fa, 0x62c8a7f9, 0xb602c312, 0x44694011, 0x5739b3e5, 0xa55230e6,
    0xfb410cc2, 0x092a8fc1, 0x1a7a7c35, 0xe811ff36, 0x3cdb9bdd, 0xceb018de, 0xdde0eb2a, 0x2f8b6829,
    0x82f63b78, 0x709db87b, 0x63cd4b8f, 0x91a6c88c, 0x456cac67, 0xb7072f64, 0xa457dc90, 0x563c5f93,
    0x082f63b7, 0xfa44e0b4, 0xe9141340, 0x1b7f9043, 0xcfb5f4a8, 0x3dde77ab, 0x2e8e845f, 0xdce5075c,
    0x92a8fc17, 0x60c37f14, 0x73938ce0, 0x81f80fe3, 0x55326b08, 0xa759e80b, 0xb4091bff, 0x466298fc,
    0x1871a4d8, 0xea1a27db, 0xf94ad42f, 0x0b21572c, 0xdfeb33c7, 0x2d80b0c4, 0x3ed04330, 0xccbbc033,
    0xa24bb5a6, 0x502036a5, 0x4370c551, 0xb11b4652, 0x65d122b9, 0x97baa1ba, 0x84ea524e, 0x7681d14d,
    0x2892ed69, 0xdaf96e6a, 0xc9a99d9e, 0x3bc21e9d, 0xef087a76, 0x1d63f975, 0x0e330a81, 0xfc588982,
    0xb21572c9, 0x407ef1ca, 0x532e023e, 0xa145813d, 0x758fe5d6, 0x87e466d5, 0x94b49521, 0x66df1622,
    0x38cc2a06, 0xcaa7a905, 0xd9f75af1, 0x2b9cd9f2, 0xff56bd19, 0x0d3d3e1a, 0x1e6dcdee, 0xec064eed,
    0xc38d26c4, 0x31e6a5c7, 0x22b65633, 0xd0ddd530, 0x0417b1db, 0xf67c32d8, 0xe52cc12c, 0x1747422f,
    0x49547e0b, 0xbb3ffd08, 0xa86f0efc, 0x5a048dff, 0x8ecee914, 0x7ca56a17, 0x6ff599e3, 0x9d9e1ae0,
    0xd3d3e1ab, 0x21b862a8, 0x32e8915c, 0xc083125f, 0x144976b4, 0xe622f5b7, 0xf5720643, 0x07198540,
    0x590ab964, 0xab613a67, 0xb831c993, 0x4a5a4a90, 0x9e902e7b, 0x6cfbad78, 0x7fab5e8c, 0x8dc0dd8f,
    0xe330a81a, 0x115b2b19, 0x020bd8ed, 0xf0605bee, 0x24aa3f05, 0xd6c1bc06, 0xc5914ff2, 0x37faccf1,
    0x69e9f0d5, 0x9b8273d6, 0x88d28022, 0x7ab90321, 0xae7367ca, 0x5c18e4c9, 0x4f48173d, 0xbd23943e,
    0xf36e6f75, 0x0105ec76, 0x12551f82, 0xe03e9c81, 0x34f4f86a, 0xc69f7b69, 0xd5cf889d, 0x27a40b9e,
    0x79b737ba, 0x8bdcb4b9, 0x988c474d, 0x6ae7c44e, 0xbe2da0a5, 0x4c4623a6, 0x5f16d052, 0xad7d5351};

uint32_t clcnn_crc32c(uint32_t crc, const void *data, size_t n) {
    const unsigned char *p = data;
    crc = ~crc;
    for (size_t i = 0; i < n; i++)
        crc = crc32c_table[(crc ^ p[i]) & 0xffu] ^ (crc >> 8);
    return ~crc;
}

/* TFRecord masks the CRC because a CRC of data that itself holds CRCs is weak. */
static uint32_t masked_crc32c(const void *data, size_t n) {
    uint32_t crc = clcnn_crc32c(0, data, n);
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

static size_t varint_len(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static unsigned char *put_varint(unsigned char *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *p++ = (unsigned char)v;
    return p;
}

/* Little-endian by construction, whatever the host's byte order. */
static unsigned char *put_le(unsigned char *p, uint64_t v, int nbytes) {
    for (int i = 0; i < nbytes; i++)
        *p++ = (unsigned char)(v >> (8 * i));
    return p;
}

static unsigned char *put_double(unsigned char *p, double d) {
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    return put_le(p, bits, 8);
}

static unsigned char *put_float(unsigned char *p, float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return put_le(p, bits, 4);
}

/* Protobuf field keys: (field number << 3) | wire type (0 varint, 1 fixed64, 2 bytes,
 * 5 fixed32). Every field number here is below 16, so each key is one byte. */
#define KEY(field, wire) ((unsigned char)(((field) << 3) | (wire)))

static unsigned char *put_bytes(unsigned char *p, int field, const void *data, size_t n) {
    *p++ = KEY(field, 2);
    p = put_varint(p, n);
    memcpy(p, data, n);
    return p + n;
}

static clcnn_status reserve(clcnn_tblog *tb, size_t payload, clcnn_error *e) {
    size_t need = HEADER_BYTES + payload + TRAILER_BYTES;
    if (need <= tb->cap) return CLCNN_SUCCESS;
    unsigned char *b = realloc(tb->buf, need);
    if (!b) return clcnn_fail(e, CLCNN_ERR_OUT_OF_HOST_MEMORY, "%s: out of memory", tb->path);
    tb->buf = b;
    tb->cap = need;
    return CLCNN_SUCCESS;
}

/* Frames the payload already at tb->buf + HEADER_BYTES and hands the record to the OS with
 * write(2), whole or not at all: a write that fails part-way (a full disk) is cut back off the
 * file, which then still ends in a whole record and stays readable to its end. */
static clcnn_status emit(clcnn_tblog *tb, size_t payload, clcnn_error *e) {
    unsigned char *b = tb->buf;
    size_t total = HEADER_BYTES + payload + TRAILER_BYTES, done = 0;
    put_le(b, payload, 8);
    put_le(b + 8, masked_crc32c(b, 8), 4);
    put_le(b + HEADER_BYTES + payload, masked_crc32c(b + HEADER_BYTES, payload), 4);
    while (done < total) {
        ssize_t k = write(tb->fd, b + done, total - done);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            tb->write_errno = k < 0 ? errno : EIO;
            if (done > 0 && ftruncate(tb->fd, tb->size) != 0)
                return clcnn_fail(e, CLCNN_ERR_IO, "%s: %s; cutting the partial record failed: %s",
                                  tb->path, strerror(tb->write_errno), strerror(errno));
            return clcnn_fail(e, CLCNN_ERR_IO, "%s: %s", tb->path, strerror(tb->write_errno));
        }
        done += (size_t)k;
    }
    tb->size += (off_t)total;
    return CLCNN_SUCCESS;
}

/* Event{wall_time = 1, file_version = 3}: how readers learn the format version. */
static clcnn_status write_file_version(clcnn_tblog *tb, double wall_time, clcnn_error *e) {
    static const char version[] = "brain.Event:2";
    size_t n = sizeof version - 1;
    size_t payload = 1 + 8 + 1 + varint_len(n) + n;
    clcnn_status st = reserve(tb, payload, e);
    if (st != CLCNN_SUCCESS) return st;
    unsigned char *p = tb->buf + HEADER_BYTES;
    *p++ = KEY(1, 1);
    p = put_double(p, wall_time);
    p = put_bytes(p, 3, version, n);
    CLCNN_ASSERT((size_t)(p - tb->buf) == HEADER_BYTES + payload);
    return emit(tb, payload, e);
}

clcnn_status clcnn_tblog_scalar(clcnn_tblog *tb, const char *tag, float value, int64_t step,
                                double wall_time, clcnn_error *e) {
    if (!tb || !tag || !*tag)
        return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT, "tblog_scalar: NULL handle or empty tag");
    /* The file ends in whole records, but one is missing: a file with a silent gap in it is
     * worse than one that stops where the trouble began. */
    if (tb->write_errno)
        return clcnn_fail(e, CLCNN_ERR_IO, "%s: an earlier write failed: %s", tb->path,
                          strerror(tb->write_errno));
    size_t tag_len = strlen(tag);
    if (tag_len > MAX_TAG_BYTES)
        return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT, "tblog_scalar: tag of %zu bytes (max %d)",
                          tag_len, MAX_TAG_BYTES);

    /* Event{wall_time = 1, step = 2, summary = 5 {value = 1 {tag = 1, simple_value = 2}}}.
     * step is written even when 0 (proto3 would omit it); readers decode both the same way. */
    size_t value_len = 1 + varint_len(tag_len) + tag_len + 1 + 4;
    size_t summary_len = 1 + varint_len(value_len) + value_len;
    size_t payload =
        1 + 8 + 1 + varint_len((uint64_t)step) + 1 + varint_len(summary_len) + summary_len;
    clcnn_status st = reserve(tb, payload, e);
    if (st != CLCNN_SUCCESS) return st;

    unsigned char *p = tb->buf + HEADER_BYTES;
    *p++ = KEY(1, 1);
    p = put_double(p, wall_time);
    *p++ = KEY(2, 0);
    p = put_varint(p, (uint64_t)step); /* negative int64: ten-byte two's complement varint */
    *p++ = KEY(5, 2);
    p = put_varint(p, summary_len);
    *p++ = KEY(1, 2);
    p = put_varint(p, value_len);
    p = put_bytes(p, 1, tag, tag_len);
    *p++ = KEY(2, 5);
    p = put_float(p, value);
    CLCNN_ASSERT((size_t)(p - tb->buf) == HEADER_BYTES + payload);
    return emit(tb, payload, e);
}

/* The hostname goes into a file name: keep it to characters that are safe in one. */
static void file_safe_hostname(char *host, size_t size) {
    if (gethostname(host, size) != 0 || host[0] == '\0') snprintf(host, size, "localhost");
    host[size - 1] = '\0'; /* gethostname need not terminate a truncated name */
    for (char *c = host; *c; c++)
        if (!isalnum((unsigned char)*c) && *c != '-' && *c != '.' && *c != '_') *c = '_';
}

clcnn_status clcnn_tblog_open(clcnn_tblog **out, const char *logdir, clcnn_error *e) {
    clcnn_status st = CLCNN_SUCCESS;
    clcnn_tblog *tb = NULL;
    int fd = -1;
    int created = 0;
    if (!out || !logdir || !*logdir)
        return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT, "tblog_open: NULL argument or empty dir");
    *out = NULL;
    st = clcnn_mkdir_p(logdir, 0777, e);
    if (st != CLCNN_SUCCESS) return st;

    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    char host[256];
    file_safe_hostname(host, sizeof host);
    size_t dir_len = strlen(logdir);
    while (dir_len > 1 && logdir[dir_len - 1] == '/') /* "runs/" must not give "runs//events" */
        dir_len--;

    tb = calloc(1, sizeof *tb);
    if (tb) tb->fd = -1;
    size_t path_size = dir_len + strlen(host) + 64;
    if (tb) tb->path = malloc(path_size);
    if (!tb || !tb->path) {
        st = clcnn_fail(e, CLCNN_ERR_OUT_OF_HOST_MEMORY, "%s: out of memory", logdir);
        goto fail;
    }
    /* O_EXCL makes "never overwrite" hold even against another process racing for the name. */
    for (int n = 0;; n++) {
        char suffix[16] = "";
        if (n > 0) snprintf(suffix, sizeof suffix, ".%d", n);
        snprintf(tb->path, path_size, "%.*s/events.out.tfevents.%010lld.%s%s", (int)dir_len, logdir,
                 (long long)now.tv_sec, host, suffix);
        fd = open(tb->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd >= 0) break;
        if (errno != EEXIST || n == 999) {
            st = clcnn_fail(e, CLCNN_ERR_IO, "%s: %s", tb->path, strerror(errno));
            goto fail;
        }
    }
    created = 1;
    tb->fd = fd;
    fd = -1; /* owned by tb now */
    st = write_file_version(tb, (double)now.tv_sec + (double)now.tv_nsec * 1e-9, e);
    if (st != CLCNN_SUCCESS) goto fail;
    *out = tb;
    return CLCNN_SUCCESS;

fail:
    if (fd >= 0) close(fd);
    if (tb) {
        if (tb->fd >= 0) close(tb->fd);
        /* A file without its version record would only confuse readers. */
        if (created) unlink(tb->path);
        free(tb->buf);
        free(tb->path);
        free(tb);
    }
    return st;
}

const char *clcnn_tblog_path(const clcnn_tblog *tb) {
    return tb ? tb->path : NULL;
}

clcnn_status clcnn_tblog_close(clcnn_tblog *tb, clcnn_error *e) {
    clcnn_status st = CLCNN_SUCCESS;
    if (!tb) return CLCNN_SUCCESS;
    if (close(tb->fd) != 0) {
        st = clcnn_fail(e, CLCNN_ERR_IO, "%s: %s", tb->path, strerror(errno));
    } else if (tb->write_errno) {
        st = clcnn_fail(e, CLCNN_ERR_IO, "%s: an earlier write failed: %s", tb->path,
                        strerror(tb->write_errno));
    }
    free(tb->buf);
    free(tb->path);
    free(tb);
    return st;
}
