/* Tests for src/safetensors.c: round trips, byte-exact compatibility with files written by the
 * Python safetensors library, a table of malformed headers, and the atomic-write guarantees. */
#define _POSIX_C_SOURCE 200809L

#include "safetensors.h"

#include <errno.h>
#include <glob.h>
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

/* Like CHECK, with the library's message, which is what tells why a status was wrong. */
#define CHECK_ST(st, want, err)                                                                    \
    do {                                                                                           \
        clcnn_status st_ = (st);                                                                   \
        if (st_ != (want)) {                                                                       \
            fprintf(stderr, "%s:%d: %s returned %s, expected %s (message: %s)\n", __FILE__,        \
                    __LINE__, #st, clcnn_status_str(st_), clcnn_status_str(want), (err).msg);      \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static char tmpdir[256];

/* A path in the test's directory. Rotates through 16 buffers, more than any test holds. */
static char *path_in(const char *name) {
    static char buf[16][512];
    static int k;
    k = (k + 1) % 16;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static int exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* Whether a temporary file of path ("<path>.tmp.<pid>.<random>", see files.h) is left. */
static int tmp_left(const char *path) {
    char pattern[600];
    glob_t g;
    snprintf(pattern, sizeof pattern, "%s.tmp.*", path);
    int found = glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc > 0;
    globfree(&g);
    return found;
}

/* A safetensors image: the 8-byte length, `header` and `data_len` bytes of data 0, 1, 2, ... */
static unsigned char *make_image(const char *header, size_t data_len, size_t *size) {
    size_t hlen = strlen(header);
    unsigned char *b = malloc(8 + hlen + data_len + 1);
    if (!b) abort();
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    memcpy(b + 8, header, hlen);
    for (size_t i = 0; i < data_len; i++)
        b[8 + hlen + i] = (unsigned char)i;
    *size = 8 + hlen + data_len;
    return b;
}

/* ---------------------------------------------------------------------------------------- */

static void test_dtypes(void) {
    for (int i = 0; i < CLCNN_ST_NDTYPES; i++) {
        clcnn_st_dtype dt;
        CHECK(clcnn_st_dtype_from_name(clcnn_st_dtype_name((clcnn_st_dtype)i), &dt) == 0);
        CHECK(dt == (clcnn_st_dtype)i);
        CHECK(clcnn_st_dtype_size((clcnn_st_dtype)i) > 0);
    }
    CHECK(clcnn_st_dtype_size(CLCNN_ST_BF16) == 2);
    CHECK(clcnn_st_dtype_size(CLCNN_ST_BOOL) == 1);
    CHECK(clcnn_st_dtype_size(CLCNN_ST_NDTYPES) == 0);
    CHECK(strcmp(clcnn_st_dtype_name(CLCNN_ST_NDTYPES), "?") == 0);
    clcnn_st_dtype dt;
    CHECK(clcnn_st_dtype_from_name("f32", &dt) != 0);
}

static void test_round_trip(void) {
    static const float f32[6] = {1, -2.5f, 3, 4, 5e-8f, 6e30f};
    static const double f64[4] = {1.0 / 3, -0.0, 1e300, -7};
    static const uint16_t f16[3] = {0x3c00, 0x4000, 0xfc00};
    static const uint16_t bf16[2] = {0x3f80, 0xc000};
    static const int64_t i64[4] = {INT64_MIN, -1, 0, INT64_MAX};
    static const int32_t i32[3] = {-5, 7, INT32_MAX};
    static const int16_t i16[2] = {-300, 300};
    static const int8_t i8[4] = {-128, -1, 0, 127};
    static const uint8_t u8[5] = {0, 1, 2, 254, 255};
    static const uint8_t bools[3] = {1, 0, 1};
    static const float scalar = 3.25f;
    static const uint8_t i8_odd[3] = {9, 8, 7}; /* puts the next tensor at an odd offset */
    const clcnn_st_entry entries[] = {
        {"conv1.weight", CLCNN_ST_F32, 2, {2, 3}, f32},
        {"f64", CLCNN_ST_F64, 1, {4}, f64},
        {"f16", CLCNN_ST_F16, 3, {1, 3, 1}, f16},
        {"bf16", CLCNN_ST_BF16, 1, {2}, bf16},
        {"odd", CLCNN_ST_I8, 1, {3}, i8_odd},
        {"i64", CLCNN_ST_I64, 2, {2, 2}, i64},
        {"i32", CLCNN_ST_I32, 1, {3}, i32},
        {"i16", CLCNN_ST_I16, 1, {2}, i16},
        {"i8", CLCNN_ST_I8, 4, {1, 1, 2, 2}, i8},
        {"u8", CLCNN_ST_U8, 1, {5}, u8},
        {"mask", CLCNN_ST_BOOL, 1, {3}, bools},
        {"scalar", CLCNN_ST_F32, 0, {0}, &scalar},
        {"empty", CLCNN_ST_F32, 2, {0, 4}, NULL},
        {"we\"ird\\name\n\t\x01/", CLCNN_ST_U8, 8, {1, 1, 1, 1, 1, 1, 1, 1}, u8},
        {"\xcf\x80.\xce\xbb", CLCNN_ST_U8, 1, {2}, u8},
    };
    const int n = (int)(sizeof entries / sizeof *entries);
    const char *meta[] = {"format", "pt", "note", "quote\" back\\slash\nnew line \xc3\xa9"};
    const char *path = path_in("round.safetensors");
    clcnn_error err = {0};
    clcnn_st_file f = {0};

    CHECK_ST(clcnn_st_write(path, entries, n, meta, 2, &err), CLCNN_SUCCESS, err);
    CHECK(!tmp_left(path));
    CHECK_ST(clcnn_st_read(&f, path, &err), CLCNN_SUCCESS, err);
    CHECK(f.ntensors == n);
    CHECK(f.data_start % 8 == 0);
    for (int i = 0; i < n && i < f.ntensors; i++) {
        const clcnn_st_entry *en = &entries[i];
        const clcnn_st_tensor *t = clcnn_st_find(&f, en->name);
        CHECK(t == &f.tensors[i]); /* header order is the write order */
        if (!t) continue;
        CHECK(strcmp(t->name, en->name) == 0);
        CHECK(t->dtype == en->dtype);
        CHECK(t->ndim == en->ndim);
        size_t count = 1;
        for (int d = 0; d < en->ndim; d++) {
            CHECK(t->shape[d] == en->shape[d]);
            count *= (size_t)en->shape[d];
        }
        size_t bytes = count * clcnn_st_dtype_size(en->dtype);
        CHECK(t->end - t->begin == bytes);
        CHECK(t->begin == (i ? f.tensors[i - 1].end : 0)); /* back to back, as Python wants */
        CHECK(bytes == 0 || memcmp(clcnn_st_data(&f, t), en->data, bytes) == 0);
    }
    const clcnn_st_tensor *s = clcnn_st_find(&f, "scalar");
    float v = 0;
    if (s) memcpy(&v, clcnn_st_data(&f, s), sizeof v);
    CHECK(s && s->ndim == 0 && v == 3.25f);
    CHECK(clcnn_st_find(&f, "missing") == NULL);
    CHECK(clcnn_st_find(&f, "") == NULL);
    CHECK(f.nmeta == 2);
    CHECK(clcnn_st_meta(&f, "format") && strcmp(clcnn_st_meta(&f, "format"), "pt") == 0);
    CHECK(clcnn_st_meta(&f, "note") && strcmp(clcnn_st_meta(&f, "note"), meta[3]) == 0);
    CHECK(clcnn_st_meta(&f, "absent") == NULL);
    clcnn_st_free(&f);
    clcnn_st_free(&f); /* twice is safe */
    CHECK(f.tensors == NULL && f.ntensors == 0);

    /* No tensors and no metadata: "{}" padded to 8 bytes. */
    CHECK_ST(clcnn_st_write(path, NULL, 0, NULL, 0, &err), CLCNN_SUCCESS, err);
    CHECK_ST(clcnn_st_read(&f, path, &err), CLCNN_SUCCESS, err);
    CHECK(f.ntensors == 0 && f.nmeta == 0 && f.size == 16);
    CHECK(clcnn_st_find(&f, "x") == NULL);
    clcnn_st_free(&f);
}

/* Bytes written by safetensors 0.8.0 (Python, numpy), run once:
 *   save({"w": np.array([1.5, -2], dtype=np.float32)}, metadata={"a": "b"})
 *   save({"s": np.array(3, dtype=np.int64), "h": np.array([1, 2, 3], dtype=np.float16),
 *         "m": np.zeros((2, 0), dtype=np.uint8), "z": np.array([[1, 2], [3, 4]], np.int16)}) */
static const char py_w_header[] = "{\"__metadata__\":{\"a\":\"b\"},\"w\":{\"dtype\":\"F32\","
                                  "\"shape\":[2],\"data_offsets\":[0,8]}} ";
static const unsigned char py_w_data[8] = {0, 0, 0xc0, 0x3f, 0, 0, 0, 0xc0};
static const char py_multi_header[] =
    "{\"s\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,8]},\"h\":{\"dtype\":\"F16\","
    "\"shape\":[3],\"data_offsets\":[8,14]},\"z\":{\"dtype\":\"I16\",\"shape\":[2,2],\"data_"
    "offsets\":[14,22]},\"m\":{\"dtype\":\"U8\",\"shape\":[2,0],\"data_offsets\":[22,22]}}    ";
static const unsigned char py_multi_data[22] = {3,    0, 0,    0, 0, 0, 0, 0, 0, 0x3c, 0,
                                                0x40, 0, 0x42, 1, 0, 2, 0, 3, 0, 4,    0};

static unsigned char *python_image(const char *header, const unsigned char *data, size_t dlen,
                                   size_t *size) {
    unsigned char *b = make_image(header, dlen, size);
    memcpy(b + *size - dlen, data, dlen);
    return b;
}

static void test_python_compat(void) {
    clcnn_error err = {0};
    clcnn_st_file f = {0};
    size_t size;
    unsigned char *img = python_image(py_w_header, py_w_data, sizeof py_w_data, &size);
    CHECK(size == 96 && img[0] == 80); /* as Python wrote it: 80-byte header */

    CHECK_ST(clcnn_st_parse(&f, img, size, "py_w", &err), CLCNN_SUCCESS, err);
    const clcnn_st_tensor *w = clcnn_st_find(&f, "w");
    float v[2] = {0, 0};
    if (w) memcpy(v, clcnn_st_data(&f, w), sizeof v);
    CHECK(w && w->dtype == CLCNN_ST_F32 && w->ndim == 1 && w->shape[0] == 2);
    CHECK(v[0] == 1.5f && v[1] == -2.0f);
    CHECK(clcnn_st_meta(&f, "a") && strcmp(clcnn_st_meta(&f, "a"), "b") == 0);
    clcnn_st_free(&f);

    /* Our writer must produce exactly the bytes Python does for the same content. */
    const clcnn_st_entry e1 = {"w", CLCNN_ST_F32, 1, {2}, py_w_data};
    const char *meta[] = {"a", "b"};
    const char *path = path_in("py_w.safetensors");
    CHECK_ST(clcnn_st_write(path, &e1, 1, meta, 1, &err), CLCNN_SUCCESS, err);
    FILE *fp = fopen(path, "rb");
    unsigned char mine[200];
    size_t got = fp ? fread(mine, 1, sizeof mine, fp) : 0;
    if (fp) fclose(fp);
    CHECK(got == size && memcmp(mine, img, size) == 0);
    free(img);

    img = python_image(py_multi_header, py_multi_data, sizeof py_multi_data, &size);
    CHECK_ST(clcnn_st_parse(&f, img, size, "py_multi", &err), CLCNN_SUCCESS, err);
    CHECK(f.ntensors == 4 && f.nmeta == 0);
    const clcnn_st_tensor *s = clcnn_st_find(&f, "s"), *h = clcnn_st_find(&f, "h");
    const clcnn_st_tensor *z = clcnn_st_find(&f, "z"), *m = clcnn_st_find(&f, "m");
    int64_t sv = 0;
    uint16_t hv[3] = {0};
    int16_t zv[4] = {0};
    if (s) memcpy(&sv, clcnn_st_data(&f, s), sizeof sv);
    if (h) memcpy(hv, clcnn_st_data(&f, h), sizeof hv); /* at offset 8+232+8: unaligned */
    if (z) memcpy(zv, clcnn_st_data(&f, z), sizeof zv);
    CHECK(s && s->dtype == CLCNN_ST_I64 && s->ndim == 0 && sv == 3);
    CHECK(h && h->dtype == CLCNN_ST_F16 && hv[0] == 0x3c00 && hv[1] == 0x4000 && hv[2] == 0x4200);
    CHECK(z && z->ndim == 2 && z->shape[1] == 2 && zv[0] == 1 && zv[3] == 4);
    CHECK(m && m->ndim == 2 && m->shape[0] == 2 && m->shape[1] == 0 && m->begin == m->end);
    clcnn_st_free(&f);
    free(img);
}

/* Valid JSON the writer never produces but other writers may. */
static void test_lenient(void) {
    static const struct {
        const char *header;
        size_t data_len;
    } ok[] = {
        {" \r\n\t{ \"w\" : { \"dtype\" : \"U8\" , \"shape\" : [ 2 ] , \"data_offsets\" : [ 0 , 2 "
         "] } }\n\t ",
         2},
        {"{\"__metadata__\":null,\"w\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}",
         2},
        {"{\"w\":{\"x\":[1.5e-3,-0,true,false,null,{\"y\":[]},\"s\"],\"dtype\":\"U8\",\"shape\":[2]"
         ",\"data_offsets\":[0,2],\"z\":-12E+4}}",
         2},
        {"{\"w\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[1,3]}}", 8}, /* gaps, tail */
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[1,1]},"
         "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}",
         2}, /* an empty tensor inside another overlaps nothing */
        {"{}", 0},
    };
    clcnn_error err = {0};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        size_t size;
        unsigned char *img = make_image(ok[i].header, ok[i].data_len, &size);
        clcnn_st_file f = {0};
        clcnn_status st = clcnn_st_parse(&f, img, size, "lenient", &err);
        if (st != CLCNN_SUCCESS) {
            fprintf(stderr, "lenient case %zu rejected: %s\n", i, err.msg);
            failures++;
        }
        clcnn_st_free(&f);
        free(img);
    }

    /* Escapes decode to UTF-8: \u00e9 is C3 A9, the pair \ud83d\ude00 is F0 9F 98 80. */
    size_t size;
    unsigned char *img = make_image("{\"\\u00e9\\ud83d\\ude00\\/\\b\":{\"dtype\":\"U8\",\"shape\":"
                                    "[1],\"data_offsets\":[0,1]}}",
                                    1, &size);
    clcnn_st_file f = {0};
    CHECK_ST(clcnn_st_parse(&f, img, size, "escapes", &err), CLCNN_SUCCESS, err);
    CHECK(f.ntensors == 1 && strcmp(f.tensors[0].name, "\xc3\xa9\xf0\x9f\x98\x80/\b") == 0);
    clcnn_st_free(&f);
    free(img);
}

static void test_malformed(void) {
    static const struct {
        const char *header; /* NULL: use raw/raw_len */
        size_t data_len;
        const char *expect; /* a substring of the message */
    } bad[] = {
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", 8, "malformed JSON"},
        {"{\"w\" \"x\"}", 0, "file offset 13: expected ':'"},
        {"", 0, "header ends there"},
        {"[]", 0, "not a JSON object"},
        {"{} x", 0, "unexpected data after"},
        {"{\"w\":{\"dtype\":\"F99\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "unknown dtype"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,0]}}", 0, "negative"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
         "9 dimensions, more than 8"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8,
         "shape must be an array of integers"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8, "data_offsets must"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "is after end"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 7,
         "beyond the 7-byte data buffer"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 12, "needs 12"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],"
         "\"data_offsets\":[0,8]}}",
         8, "too many elements"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,99999999999999999999]}}", 8,
         "data_offsets must"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
         12, "tensors 'a' [0, 8) and 'b' [4, 12) overlap"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
         "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
         2, "duplicate tensor name 'a'"},
        {"{\"__metadata__\":{\"a\":1}}", 0, "value for key 'a' is not a string"},
        {"{\"__metadata__\":{\"a\":\"b\",\"a\":\"c\"}}", 0, "duplicate __metadata__ key"},
        {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, "duplicate __metadata__"},
        {"{\"__metadata__\":[]}", 0, "__metadata__ is not an object"},
        {"{\"w\":5}", 0, "entry is not an object"},
        {"{\"w\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "missing \"dtype\""},
        {"{\"w\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
         "duplicate key"},
        {"{\"w\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "dtype is not a string"},
        {"{\"w\":{\"dtype\":\"U8\",\"shape\":1,\"data_offsets\":[0,1]}}", 1, "shape is not an arr"},
        {"{\"w\\q\":{}}", 0, "invalid escape"},
        {"{\"w\\u12\":{}}", 0, "invalid \\u escape"},
        {"{\"\\ud800\":{}}", 0, "unpaired surrogate"},
        {"{\"\\udc00\":{}}", 0, "unpaired surrogate"},
        {"{\"a\\u0000b\":{}}", 0, "\\u0000"},
        {"{\"\xff\":{}}", 0, "invalid UTF-8"},
        {"{\"\xc0\xaf\":{}}", 0, "invalid UTF-8"},     /* overlong '/' */
        {"{\"\xed\xa0\x80\":{}}", 0, "invalid UTF-8"}, /* encoded surrogate */
        {"{\"a\nb\":{}}", 0, "control character"},
        {"{\"w", 0, "unterminated string"},
        {"{\"w\":{\"dtype\":\"U8\",\"shape\":[01],\"data_offsets\":[0,1]}}", 1, "leading zero"},
        {"{\"w\":{\"x\":1.,\"dtype\":\"U8\"}}", 0, "after '.'"},
        {"{\"w\":{\"x\":1e,\"dtype\":\"U8\"}}", 0, "exponent"},
        {"{\"w\":{\"x\":tru}}", 0, "unexpected character"},
        {"{\"w\":{\"x\":[1,]}}", 0, "unexpected character"},
        {"{\"w\":{\"dtype\":\"U8\",}}", 0, "expected a string key"},
        {"{\"w\":{\"x\":[1 2]}}", 0, "expected ',' or ']'"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}\"b\":1}", 1,
         "expected ',' or '}'"},
        {"{\"w\\n\\u0001\":7}", 0, "tensor 'w?\?': its entry"}, /* names are sanitised */
    };
    clcnn_error err = {0};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        size_t size;
        unsigned char *img = make_image(bad[i].header, bad[i].data_len, &size);
        clcnn_st_file f = {0};
        memset(err.msg, 0, sizeof err.msg);
        clcnn_status st = clcnn_st_parse(&f, img, size, "bad.st", &err);
        if (st != CLCNN_ERR_FORMAT || !strstr(err.msg, bad[i].expect) ||
            strncmp(err.msg, "bad.st: ", 8) != 0 || strchr(err.msg, '\n')) {
            fprintf(stderr,
                    "malformed case %zu (%s): got %s \"%s\", want CLCNN_ERR_FORMAT \"%s\"\n", i,
                    bad[i].header, clcnn_status_str(st), err.msg, bad[i].expect);
            failures++;
        }
        CHECK(f.ntensors == 0 && f.tensors == NULL && f.bytes == NULL); /* left zeroed */
        clcnn_st_free(&f);
        free(img);
    }

    /* Raw images: too short for the length field, and a length running past the end. */
    static const unsigned char shortf[5] = {1, 0, 0, 0, 0};
    static const unsigned char longhdr[12] = {0xe8, 3, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' '};
    static const unsigned char huge[10] = {0xff, 0xff, 0xff, 0xff, 0xff,
                                           0xff, 0xff, 0xff, '{',  '}'};
    clcnn_st_file f = {0};
    CHECK_ST(clcnn_st_parse(&f, shortf, sizeof shortf, "s.st", &err), CLCNN_ERR_FORMAT, err);
    CHECK(strstr(err.msg, "s.st: file is 5 bytes, shorter than") != NULL);
    CHECK_ST(clcnn_st_parse(&f, NULL, 0, "z.st", &err), CLCNN_ERR_FORMAT, err);
    CHECK_ST(clcnn_st_parse(&f, longhdr, sizeof longhdr, "l.st", &err), CLCNN_ERR_FORMAT, err);
    CHECK(strstr(err.msg, "header length 1000 exceeds the 4 bytes") != NULL);
    CHECK_ST(clcnn_st_parse(&f, huge, sizeof huge, "h.st", &err), CLCNN_ERR_FORMAT, err);
    CHECK(strstr(err.msg, "header length 18446744073709551615") != NULL);

    /* Deep nesting in a skipped value must fail cleanly, not recurse without bound. */
    enum { DEPTH = 100000 };
    char *deep = malloc(2 * DEPTH + 32);
    if (!deep) abort();
    size_t k = (size_t)sprintf(deep, "{\"w\":{\"x\":");
    for (int i = 0; i < DEPTH; i++)
        deep[k++] = '[';
    for (int i = 0; i < DEPTH; i++)
        deep[k++] = ']';
    strcpy(deep + k, "}}");
    size_t size;
    unsigned char *img = make_image(deep, 0, &size);
    CHECK_ST(clcnn_st_parse(&f, img, size, "deep.st", &err), CLCNN_ERR_FORMAT, err);
    CHECK(strstr(err.msg, "nested more than 64 deep") != NULL);
    free(img);
    free(deep);
}

static void test_read_errors(void) {
    clcnn_error err = {0};
    clcnn_st_file f = {0};
    const char *missing = path_in("no_such.safetensors");
    CHECK_ST(clcnn_st_read(&f, missing, &err), CLCNN_ERR_IO, err);
    CHECK(strstr(err.msg, missing) && strstr(err.msg, "cannot open"));
    CHECK_ST(clcnn_st_read(&f, tmpdir, &err), CLCNN_ERR_IO, err); /* a directory */
    CHECK(f.ntensors == 0 && f.owned == NULL);

    /* A file on disk with a bad header reports the path. */
    const char *path = path_in("bad_on_disk.safetensors");
    size_t size;
    unsigned char *img = make_image("{\"w\":{\"dtype\":\"X\"}}", 0, &size);
    FILE *fp = fopen(path, "wb");
    CHECK(fp && fwrite(img, 1, size, fp) == size);
    if (fp) fclose(fp);
    free(img);
    CHECK_ST(clcnn_st_read(&f, path, &err), CLCNN_ERR_FORMAT, err);
    CHECK(strncmp(err.msg, path, strlen(path)) == 0 && strstr(err.msg, "unknown dtype \"X\""));
    clcnn_st_free(&f);
    clcnn_st_free(NULL);
}

static void test_write_rejects(void) {
    static const float x[2] = {1, 2};
    clcnn_error err = {0};
    const char *path = path_in("rejected.safetensors");
    const clcnn_st_entry dup[2] = {{"a", CLCNN_ST_F32, 1, {2}, x}, {"a", CLCNN_ST_F32, 1, {2}, x}};
    const clcnn_st_entry reserved = {"__metadata__", CLCNN_ST_F32, 1, {2}, x};
    const clcnn_st_entry ndim9 = {"a", CLCNN_ST_F32, 9, {1}, x};
    const clcnn_st_entry negative = {"a", CLCNN_ST_F32, 1, {-2}, x};
    const clcnn_st_entry nodata = {"a", CLCNN_ST_F32, 1, {2}, NULL};
    const clcnn_st_entry notutf8 = {"a\xff", CLCNN_ST_F32, 1, {2}, x};
    const clcnn_st_entry badtype = {"a", CLCNN_ST_NDTYPES, 1, {2}, x};
    const clcnn_st_entry overflow[2] = {{"a", CLCNN_ST_U8, 1, {INT64_MAX}, x},
                                        {"b", CLCNN_ST_U8, 1, {INT64_MAX}, x}};
    const char *dupmeta[4] = {"k", "1", "k", "2"};
    const char *nullmeta[2] = {"k", NULL};
    CHECK_ST(clcnn_st_write(path, dup, 2, NULL, 0, &err), CLCNN_ERR_INVALID_ARGUMENT, err);
    CHECK(strstr(err.msg, "duplicate tensor name 'a'") != NULL);
    CHECK_ST(clcnn_st_write(path, &reserved, 1, NULL, 0, &err), CLCNN_ERR_INVALID_ARGUMENT, err);
    CHECK_ST(clcnn_st_write(path, &ndim9, 1, NULL, 0, &err), CLCNN_ERR_INVALID_ARGUMENT, err);
    CHECK_ST(clcnn_st_write(path, &negative, 1, NULL, 0, &err), CLCNN_ERR_INVALID_ARGUMENT, err);
    CHECK_ST(clcnn_st_write(path, &nodata, 1, NULL, 0, &err), CLCNN_ERR_INVALID_ARGUMENT, err);
    CHECK_ST(clcnn_st_write(path, &notutf8, 1, NULL, 0, &err), CLCNN_ERR_INVALID_ARGUMENT, err);
    CHECK_ST(clcnn_st_write(path, &badtype, 1, NULL, 0, &err), CLCNN_ERR_INVALID_ARGUMENT, err);
    CHECK_ST(clcnn_st_write(path, overflow, 2, NULL, 0, &err), CLCNN_ERR_INVALID_ARGUMENT, err);
    CHECK_ST(clcnn_st_write(path, NULL, 0, dupmeta, 2, &err), CLCNN_ERR_INVALID_ARGUMENT, err);
    CHECK(strstr(err.msg, "duplicate metadata key 'k'") != NULL);
    CHECK_ST(clcnn_st_write(path, NULL, 0, nullmeta, 1, &err), CLCNN_ERR_INVALID_ARGUMENT, err);
    CHECK_ST(clcnn_st_write(path, NULL, -1, NULL, 0, &err), CLCNN_ERR_INVALID_ARGUMENT, err);
    CHECK_ST(clcnn_st_write(NULL, NULL, 0, NULL, 0, &err), CLCNN_ERR_INVALID_ARGUMENT, err);
    CHECK(!exists(path) && !tmp_left(path));
}

/* The file at path still holds the one-tensor file test_atomic wrote first. */
static int holds_original(const char *path) {
    clcnn_error err = {0};
    clcnn_st_file f = {0};
    int ok = clcnn_st_read(&f, path, &err) == CLCNN_SUCCESS && f.ntensors == 1 &&
             clcnn_st_find(&f, "original") != NULL;
    clcnn_st_free(&f);
    return ok;
}

static void test_atomic(void) {
    static const float orig[2] = {1, 2};
    static float big[4096];
    const clcnn_st_entry first = {"original", CLCNN_ST_F32, 1, {2}, orig};
    const clcnn_st_entry second = {"replacement", CLCNN_ST_F32, 1, {4096}, big};
    clcnn_error err = {0};
    const char *path = path_in("atomic.safetensors");
    CHECK_ST(clcnn_st_write(path, &first, 1, NULL, 0, &err), CLCNN_SUCCESS, err);
    CHECK(holds_original(path));

    /* A path in a directory that does not exist. */
    const char *nodir = path_in("no_such_dir/x.safetensors");
    CHECK_ST(clcnn_st_write(nodir, &first, 1, NULL, 0, &err), CLCNN_ERR_IO, err);
    CHECK(strstr(err.msg, "no_such_dir/x.safetensors: cannot create") != NULL);

    /* Links planted at the names an older writer used ("<path>.tmp.<pid>") and at a name of
     * the new form are never followed: the write succeeds into a fresh file of its own and
     * the links' target keeps its bytes. */
    char link1[600], link2[600];
    const char *victim = path_in("victim");
    FILE *vf = fopen(victim, "wb");
    CHECK(vf != NULL);
    if (vf) fputs("precious", vf), fclose(vf);
    snprintf(link1, sizeof link1, "%s.tmp.%ld", path, (long)getpid());
    snprintf(link2, sizeof link2, "%s.tmp.%ld.aaaaaa", path, (long)getpid());
    CHECK(symlink(victim, link1) == 0 && symlink(victim, link2) == 0);
    CHECK_ST(clcnn_st_write(path, &first, 1, NULL, 0, &err), CLCNN_SUCCESS, err);
    CHECK(holds_original(path));
    struct stat lsb;
    CHECK(lstat(link1, &lsb) == 0 && S_ISLNK(lsb.st_mode));
    CHECK(lstat(path, &lsb) == 0 && S_ISREG(lsb.st_mode) && (lsb.st_mode & 0777) != 0600);
    vf = fopen(victim, "rb");
    char vbuf[16] = "";
    CHECK(vf && fgets(vbuf, sizeof vbuf, vf) && !strcmp(vbuf, "precious"));
    if (vf) fclose(vf);
    unlink(link1);
    unlink(link2);
    remove(victim);

    /* The rename fails: the target is a non-empty directory. */
    const char *dir = path_in("target_is_dir");
    const char *inner = path_in("target_is_dir/keep");
    CHECK(mkdir(dir, 0700) == 0);
    FILE *fp = fopen(inner, "wb");
    CHECK(fp != NULL);
    if (fp) fclose(fp);
    CHECK_ST(clcnn_st_write(dir, &first, 1, NULL, 0, &err), CLCNN_ERR_IO, err);
    CHECK(strstr(err.msg, "cannot rename") != NULL);
    CHECK(exists(inner) && !tmp_left(dir));
    remove(inner);
    rmdir(dir);

    /* A write that runs out of room midway (a file size limit works even for root). */
    struct rlimit old, lim;
    if (getrlimit(RLIMIT_FSIZE, &old) == 0) {
        lim = old;
        lim.rlim_cur = 4096;
        signal(SIGXFSZ, SIG_IGN);
        if (setrlimit(RLIMIT_FSIZE, &lim) == 0) {
            clcnn_status st = clcnn_st_write(path, &second, 1, NULL, 0, &err);
            setrlimit(RLIMIT_FSIZE, &old);
            CHECK_ST(st, CLCNN_ERR_IO, err);
            CHECK(strstr(err.msg, "failed") != NULL);
            CHECK(holds_original(path));
            CHECK(!tmp_left(path));
        }
        signal(SIGXFSZ, SIG_DFL);
    }

    /* An unwritable directory. Root ignores permissions, so this part only runs unprivileged. */
    const char *ro = path_in("readonly");
    const char *ro_file = path_in("readonly/atomic.safetensors");
    CHECK(mkdir(ro, 0700) == 0);
    CHECK_ST(clcnn_st_write(ro_file, &first, 1, NULL, 0, &err), CLCNN_SUCCESS, err);
    if (geteuid() != 0 && chmod(ro, 0500) == 0) {
        CHECK_ST(clcnn_st_write(ro_file, &second, 1, NULL, 0, &err), CLCNN_ERR_IO, err);
        CHECK(strstr(err.msg, strerror(EACCES)) != NULL);
        chmod(ro, 0700);
        CHECK(holds_original(ro_file));
    } else {
        printf("test_safetensors: running as root, unwritable-directory case skipped\n");
    }
    remove(ro_file);
    rmdir(ro);

    /* And a successful overwrite replaces the file. */
    CHECK_ST(clcnn_st_write(path, &second, 1, NULL, 0, &err), CLCNN_SUCCESS, err);
    CHECK(!holds_original(path) && !tmp_left(path));
}

/* A checkpoint-sized file: 300 tensors, 2.4 MB. Guards against quadratic behaviour. */
static void test_many(void) {
    enum { N = 300, ELEMS = 2048 };
    clcnn_st_entry *entries = calloc(N, sizeof *entries);
    char(*names)[32] = calloc(N, sizeof *names);
    float *data = malloc((size_t)N * ELEMS * sizeof *data);
    if (!entries || !names || !data) abort();
    for (size_t i = 0; i < (size_t)N * ELEMS; i++)
        data[i] = (float)i;
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "layer%03d.weight", N - 1 - i);
        entries[i] = (clcnn_st_entry){names[i], CLCNN_ST_F32, 2, {32, 64}, data + i * ELEMS};
    }
    clcnn_error err = {0};
    clcnn_st_file f = {0};
    const char *path = path_in("many.safetensors");
    clock_t t0 = clock();
    CHECK_ST(clcnn_st_write(path, entries, N, NULL, 0, &err), CLCNN_SUCCESS, err);
    clock_t t1 = clock();
    CHECK_ST(clcnn_st_read(&f, path, &err), CLCNN_SUCCESS, err);
    clock_t t2 = clock();
    CHECK(f.ntensors == N);
    for (int i = 0; i < N && f.ntensors == N; i++) {
        const clcnn_st_tensor *t = clcnn_st_find(&f, names[i]);
        float first = -1;
        if (t) memcpy(&first, clcnn_st_data(&f, t), sizeof first);
        CHECK(t && t->end - t->begin == ELEMS * sizeof(float) && first == (float)(i * ELEMS));
    }
    clcnn_st_free(&f);
    printf("test_safetensors: %d tensors, %zu bytes: write %.3f s, read %.3f s (CPU)\n", N,
           (size_t)N * ELEMS * sizeof(float), (double)(t1 - t0) / CLOCKS_PER_SEC,
           (double)(t2 - t1) / CLOCKS_PER_SEC);
    remove(path);
    free(data);
    free(names);
    free(entries);
}

int main(void) {
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/clcnn_st_XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmpdir)) {
        fprintf(stderr, "test_safetensors: mkdtemp(%s): %s\n", tmpdir, strerror(errno));
        return 1;
    }
    test_dtypes();
    test_round_trip();
    test_python_compat();
    test_lenient();
    test_malformed();
    test_read_errors();
    test_write_rejects();
    test_atomic();
    test_many();

    static const char *const leftovers[] = {"round.safetensors", "py_w.safetensors",
                                            "bad_on_disk.safetensors", "atomic.safetensors"};
    for (size_t i = 0; i < sizeof leftovers / sizeof *leftovers; i++)
        remove(path_in(leftovers[i]));
    if (rmdir(tmpdir) != 0) {
        fprintf(stderr, "test_safetensors: %s not empty after the tests\n", tmpdir);
        failures++;
    }
    if (failures) {
        fprintf(stderr, "test_safetensors: %d check(s) failed\n", failures);
        return 1;
    }
    printf("test_safetensors: all checks passed\n");
    return 0;
}
