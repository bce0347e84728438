/* safetensors reader and writer, with the small JSON parser the header needs. The header comes
 * from files we did not write, so the parser is built for hostile input: every read is bounds
 * checked, nesting is limited, and all size arithmetic is checked for overflow. */
#define _POSIX_C_SOURCE 200809L

#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"

/* Values nested deeper than this are rejected instead of recursed into: the real header needs
 * three levels, and a fuzzer's "[[[[..." must not exhaust the stack. */
#define JP_MAX_DEPTH 64

/* Bytes of a file-supplied name quoted in a message (plus room for "..." and the NUL). */
#define SHOWN_MAX CLCNN_SHOWN_MAX

static const struct {
    const char *name;
    size_t size;
} dtypes[CLCNN_ST_NDTYPES] = {
    [CLCNN_ST_F32] = {"F32", 4},         [CLCNN_ST_F64] = {"F64", 8},
    [CLCNN_ST_F16] = {"F16", 2},         [CLCNN_ST_BF16] = {"BF16", 2},
    [CLCNN_ST_I64] = {"I64", 8},         [CLCNN_ST_I32] = {"I32", 4},
    [CLCNN_ST_I16] = {"I16", 2},         [CLCNN_ST_I8] = {"I8", 1},
    [CLCNN_ST_U8] = {"U8", 1},           [CLCNN_ST_BOOL] = {"BOOL", 1},
    [CLCNN_ST_U16] = {"U16", 2},         [CLCNN_ST_U32] = {"U32", 4},
    [CLCNN_ST_U64] = {"U64", 8},         [CLCNN_ST_F8_E4M3] = {"F8_E4M3", 1},
    [CLCNN_ST_F8_E5M2] = {"F8_E5M2", 1},
};

size_t clcnn_st_dtype_size(clcnn_st_dtype dt) {
    return (unsigned)dt < CLCNN_ST_NDTYPES ? dtypes[dt].size : 0;
}

const char *clcnn_st_dtype_name(clcnn_st_dtype dt) {
    return (unsigned)dt < CLCNN_ST_NDTYPES ? dtypes[dt].name : "?";
}

int clcnn_st_dtype_from_name(const char *name, clcnn_st_dtype *out) {
    for (int i = 0; i < CLCNN_ST_NDTYPES; i++) {
        if (strcmp(name, dtypes[i].name) == 0) {
            *out = (clcnn_st_dtype)i;
            return 0;
        }
    }
    return -1;
}

/* ---------------------------------------------------------------------------------------- */
/* UTF-8 and message helpers                                                                  */

/* Length of the valid UTF-8 sequence starting at s[0] >= 0x80, or 0 when it is invalid:
 * truncated, overlong, a surrogate or above U+10FFFF (what serde_json, behind the Python
 * library, also refuses). */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t len;
    uint32_t cp, min;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2, cp = c & 0x1F, min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3, cp = c & 0x0F, min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4, cp = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

static int utf8_valid(const char *str) {
    const unsigned char *s = (const unsigned char *)str;
    size_t n = strlen(str);
    for (size_t i = 0; i < n;) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t m = utf8_len(s + i, n - i);
        if (m == 0) return 0;
        i += m;
    }
    return 1;
}

static size_t utf8_put(uint32_t cp, unsigned char out[4]) {
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xC0 | cp >> 6);
        out[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xE0 | cp >> 12);
        out[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | cp >> 18);
    out[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Names come from the file: at most SHOWN_MAX bytes of one are quoted, with control characters
 * replaced, so that a message stays one readable line. */
static const char *shown(const char *s, char buf[SHOWN_MAX + 4]) {
    return clcnn_shown(s, SHOWN_MAX, buf);
}

static void fmt_shape(char *buf, size_t size, const int64_t *shape, int ndim) {
    size_t k = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < ndim && k < size; i++)
        k += (size_t)snprintf(buf + k, size - k, "%s%" PRId64, i ? ", " : "", shape[i]);
    if (k < size) snprintf(buf + k, size - k, "]");
}

/* ---------------------------------------------------------------------------------------- */
/* JSON                                                                                       */

/* A cursor over the header text. Decoded strings go into `arena`: a decoded string plus its
 * NUL is never longer than its quoted source, so an arena one byte larger than the header
 * cannot run out, whatever the input. */
typedef struct jp {
    const unsigned char *s;
    size_t n, pos;
    char *arena;
    size_t cap, used;
    const char *file;
    clcnn_error *e;
} jp;

typedef struct jnum {
    int is_int; /* no fraction and no exponent */
    int neg;
    int overflow; /* magnitude above UINT64_MAX */
    uint64_t mag;
} jnum;

/* An array of integers as read, kept for the caller to judge: up to CLCNN_ST_MAX_DIMS
 * non-negative values stored, everything counted, anything else flagged. */
typedef struct jints {
    int count;
    int bad;      /* an element that is not an integer, or one beyond int64 */
    int negative; /* an element below zero */
    int64_t v[CLCNN_ST_MAX_DIMS];
} jints;

/* The message gives the file offset, which is what a hex dump of the file shows. */
static clcnn_status jp_err(const jp *p, const char *what) {
    return clcnn_fail(p->e, CLCNN_ERR_FORMAT, "%s: malformed JSON header at file offset %zu: %s%s",
                      p->file, p->pos + 8, what, p->pos >= p->n ? " (the header ends there)" : "");
}

/* Skips whitespace and returns the next byte, or -1 at the end of the header. */
static int jp_peek(jp *p) {
    while (p->pos < p->n) {
        unsigned char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return c;
        p->pos++;
    }
    return -1;
}

static int is_digit(int c) {
    return c >= '0' && c <= '9';
}

static clcnn_status jp_expect(jp *p, int c, const char *what) {
    if (jp_peek(p) != c) return jp_err(p, what);
    p->pos++;
    return CLCNN_SUCCESS;
}

/* After an element of an object or array: sets *more on ',' and clears it on `close`. */
static clcnn_status jp_next(jp *p, int close, int *more) {
    int c = jp_peek(p);
    if (c == ',' || c == close) {
        p->pos++;
        *more = c == ',';
        return CLCNN_SUCCESS;
    }
    return jp_err(p, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
}

/* Opens an object or array (the caller has seen `open`); clears *more when it is empty. */
static void jp_open(jp *p, int close, int *more) {
    p->pos++;
    *more = jp_peek(p) != close;
    if (!*more) p->pos++;
}

static int hex4(const jp *p, size_t at, uint32_t *v) {
    if (at > p->n || p->n - at < 4) return 0;
    *v = 0;
    for (size_t i = at; i < at + 4; i++) {
        unsigned c = p->s[i];
        unsigned d = is_digit((int)c)       ? c - '0'
                     : c >= 'a' && c <= 'f' ? c - 'a' + 10
                     : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                            : 16;
        if (d == 16) return 0;
        *v = *v << 4 | d;
    }
    return 1;
}

/* Decodes the escape at the cursor (a backslash) into a code point; the cursor stays on the
 * backslash when it fails, so the message points at the escape. */
static clcnn_status jp_escape(jp *p, uint32_t *cp) {
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    if (p->n - p->pos < 2) return jp_err(p, "unterminated string");
    int c = p->s[p->pos + 1];
    const char *hit = c ? strchr(from, c) : NULL;
    if (hit) {
        *cp = (unsigned char)to[hit - from];
        p->pos += 2;
        return CLCNN_SUCCESS;
    }
    if (c != 'u') return jp_err(p, "invalid escape in string");
    uint32_t hi = 0, lo = 0;
    if (!hex4(p, p->pos + 2, &hi)) return jp_err(p, "invalid \\u escape");
    if (hi >= 0xDC00 && hi <= 0xDFFF) return jp_err(p, "unpaired surrogate in \\u escape");
    if (hi < 0xD800 || hi > 0xDBFF) {
        *cp = hi;
        p->pos += 6;
        return CLCNN_SUCCESS;
    }
    size_t at = p->pos + 6;
    if (p->n - at < 2 || p->s[at] != '\\' || p->s[at + 1] != 'u' || !hex4(p, at + 2, &lo) ||
        lo < 0xDC00 || lo > 0xDFFF)
        return jp_err(p, "unpaired surrogate in \\u escape");
    *cp = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
    p->pos += 12;
    return CLCNN_SUCCESS;
}

static void jp_putc(jp *p, char *d, size_t k, unsigned char c) {
    if (!d) return;
    CLCNN_ASSERT(p->used + k < p->cap); /* see the arena bound above struct jp */
    d[k] = (char)c;
}

/* Parses the string at the cursor. With out, decodes it NUL-terminated into the arena; with
 * out NULL, only checks it. Strings must be valid UTF-8 without NULs, since they end up as
 * C strings. */
static clcnn_status jp_string(jp *p, char **out) {
    if (jp_peek(p) != '"') return jp_err(p, "expected a string");
    p->pos++;
    char *d = out ? p->arena + p->used : NULL;
    size_t k = 0;
    for (;;) {
        if (p->pos >= p->n) return jp_err(p, "unterminated string");
        unsigned char c = p->s[p->pos];
        if (c == '"') break;
        if (c < 0x20) return jp_err(p, "control character in string");
        if (c == '\\') {
            uint32_t cp = 0;
            unsigned char u[4];
            clcnn_status st = jp_escape(p, &cp);
            if (st) return st;
            if (cp == 0) {
                p->pos -= 6;
                return jp_err(p, "\\u0000 in a string");
            }
            size_t m = utf8_put(cp, u);
            for (size_t i = 0; i < m; i++)
                jp_putc(p, d, k++, u[i]);
        } else if (c < 0x80) {
            jp_putc(p, d, k++, c);
            p->pos++;
        } else {
            size_t m = utf8_len(p->s + p->pos, p->n - p->pos);
            if (m == 0) return jp_err(p, "invalid UTF-8 in string");
            for (size_t i = 0; i < m; i++)
                jp_putc(p, d, k++, p->s[p->pos + i]);
            p->pos += m;
        }
    }
    p->pos++;
    if (out) {
        jp_putc(p, d, k++, '\0');
        p->used += k;
        *out = d;
    }
    return CLCNN_SUCCESS;
}

/* An object key and the colon after it. */
static clcnn_status jp_key(jp *p, char **out) {
    if (jp_peek(p) != '"') return jp_err(p, "expected a string key");
    clcnn_status st = jp_string(p, out);
    if (st) return st;
    return jp_expect(p, ':', "expected ':' after an object key");
}

/* Strict JSON number grammar; the magnitude is accumulated only for plain integers. */
static clcnn_status jp_number(jp *p, jnum *v) {
    const unsigned char *s = p->s;
    size_t i = p->pos, n = p->n;
    memset(v, 0, sizeof *v);
    v->is_int = 1;
    if (i < n && s[i] == '-') v->neg = 1, i++;
    if (i >= n || !is_digit(s[i])) {
        p->pos = i;
        return jp_err(p, "expected a digit");
    }
    if (s[i] == '0' && i + 1 < n && is_digit(s[i + 1])) {
        p->pos = i;
        return jp_err(p, "leading zero in number");
    }
    for (; i < n && is_digit(s[i]); i++) {
        unsigned d = s[i] - '0';
        if (v->mag > (UINT64_MAX - d) / 10)
            v->overflow = 1;
        else
            v->mag = v->mag * 10 + d;
    }
    if (i < n && s[i] == '.') {
        v->is_int = 0;
        if (++i >= n || !is_digit(s[i])) {
            p->pos = i;
            return jp_err(p, "expected a digit after '.'");
        }
        while (i < n && is_digit(s[i]))
            i++;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        v->is_int = 0;
        if (++i < n && (s[i] == '+' || s[i] == '-')) i++;
        if (i >= n || !is_digit(s[i])) {
            p->pos = i;
            return jp_err(p, "expected a digit in exponent");
        }
        while (i < n && is_digit(s[i]))
            i++;
    }
    p->pos = i;
    return CLCNN_SUCCESS;
}

static clcnn_status jp_literal(jp *p) {
    static const char *const words[] = {"true", "false", "null"};
    for (size_t i = 0; i < sizeof words / sizeof *words; i++) {
        size_t len = strlen(words[i]);
        if (p->n - p->pos >= len && memcmp(p->s + p->pos, words[i], len) == 0) {
            p->pos += len;
            return CLCNN_SUCCESS;
        }
    }
    return jp_err(p, p->pos >= p->n ? "expected a value" : "unexpected character");
}

/* Checks and steps over any value; `depth` is its nesting level (the header object is 1). */
static clcnn_status jp_skip(jp *p, int depth) {
    clcnn_status st;
    int c = jp_peek(p), more;
    if (depth > JP_MAX_DEPTH) return jp_err(p, "values nested more than 64 deep");
    if (c == '"') return jp_string(p, NULL);
    if (c == '-' || is_digit(c)) {
        jnum v;
        return jp_number(p, &v);
    }
    if (c != '{' && c != '[') return jp_literal(p);
    int close = c == '{' ? '}' : ']';
    for (jp_open(p, close, &more); more;) {
        if (c == '{' && (st = jp_key(p, NULL))) return st;
        if ((st = jp_skip(p, depth + 1)) || (st = jp_next(p, close, &more))) return st;
    }
    return CLCNN_SUCCESS;
}

/* Reads an array of integers (the caller has seen '['); see struct jints. */
static clcnn_status jp_ints(jp *p, int depth, jints *a) {
    clcnn_status st;
    int more;
    memset(a, 0, sizeof *a);
    for (jp_open(p, ']', &more); more;) {
        int c = jp_peek(p);
        if (c == '-' || is_digit(c)) {
            jnum v;
            if ((st = jp_number(p, &v))) return st;
            if (!v.is_int || v.overflow || v.mag > INT64_MAX)
                a->bad = 1;
            else if (v.neg && v.mag != 0)
                a->negative = 1;
            else if (a->count < CLCNN_ST_MAX_DIMS)
                a->v[a->count] = (int64_t)v.mag;
        } else {
            a->bad = 1;
            if ((st = jp_skip(p, depth + 1))) return st;
        }
        if (a->count < INT_MAX) a->count++;
        if ((st = jp_next(p, ']', &more))) return st;
    }
    return CLCNN_SUCCESS;
}

/* ---------------------------------------------------------------------------------------- */
/* Header semantics                                                                           */

/* "<file>: tensor '<name>': <what>", the form of every per-tensor complaint. */
static clcnn_status tensor_err(const jp *p, const char *tensor, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static clcnn_status tensor_err(const jp *p, const char *tensor, const char *fmt, ...) {
    char what[512], name[SHOWN_MAX + 4];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return clcnn_fail(p->e, CLCNN_ERR_FORMAT, "%s: tensor '%s': %s", p->file, shown(tensor, name),
                      what);
}

static clcnn_status oom(const jp *p) {
    return clcnn_fail(p->e, CLCNN_ERR_OUT_OF_HOST_MEMORY, "%s: out of memory parsing the header",
                      p->file);
}

/* Doubles an array of `elem`-byte items: the new pointer (and *cap updated), or NULL with
 * arr and *cap untouched. */
static void *grow(void *arr, int *cap, size_t elem) {
    if (*cap > INT_MAX / 2) return NULL;
    int c = *cap ? *cap * 2 : 16;
    void *q = realloc(arr, (size_t)c * elem);
    if (q) *cap = c;
    return q;
}

/* Checks shape and offsets against each other and the data buffer, and stores them in t. */
static clcnn_status check_tensor(const jp *p, clcnn_st_tensor *t, const jints *shape,
                                 const jints *off, size_t data_size) {
    const char *nm = t->name;
    char dims[192];
    if (shape->negative) return tensor_err(p, nm, "negative dimension in shape");
    if (shape->bad) return tensor_err(p, nm, "shape must be an array of integers");
    if (shape->count > CLCNN_ST_MAX_DIMS)
        return tensor_err(p, nm, "shape has %d dimensions, more than %d", shape->count,
                          CLCNN_ST_MAX_DIMS);
    t->ndim = shape->count;
    memcpy(t->shape, shape->v, sizeof shape->v);
    fmt_shape(dims, sizeof dims, t->shape, t->ndim);
    if (off->bad || off->negative || off->count != 2)
        return tensor_err(p, nm, "data_offsets must be [begin, end], two non-negative integers");
    uint64_t begin = (uint64_t)off->v[0], end = (uint64_t)off->v[1];
    if (begin > end)
        return tensor_err(p, nm, "data_offsets begin %" PRIu64 " is after end %" PRIu64, begin,
                          end);
    if (end > data_size)
        return tensor_err(p, nm, "data_offsets end %" PRIu64 " is beyond the %zu-byte data buffer",
                          end, data_size);
    /* Overflow is an error even when a later dimension is 0, as in the Python library. */
    uint64_t count = 1, esize = clcnn_st_dtype_size(t->dtype);
    for (int i = 0; i < t->ndim; i++) {
        uint64_t d = (uint64_t)t->shape[i];
        if (d != 0 && count > UINT64_MAX / d)
            return tensor_err(p, nm, "shape %s has too many elements", dims);
        count *= d;
    }
    if (count > UINT64_MAX / esize) return tensor_err(p, nm, "shape %s is too large", dims);
    if (count * esize != end - begin)
        return tensor_err(p, nm, "data_offsets span %" PRIu64 " bytes but %s %s needs %" PRIu64,
                          end - begin, clcnn_st_dtype_name(t->dtype), dims, count * esize);
    t->begin = (size_t)begin;
    t->end = (size_t)end;
    return CLCNN_SUCCESS;
}

/* One tensor entry; t->name is set. Unknown keys are skipped, as the Python library does. */
static clcnn_status parse_tensor(jp *p, clcnn_st_tensor *t, size_t data_size) {
    clcnn_status st;
    const char *nm = t->name;
    int more, have_dtype = 0, have_shape = 0, have_off = 0;
    jints shape, off;
    if (jp_peek(p) != '{') return tensor_err(p, nm, "its entry is not an object");
    for (jp_open(p, '}', &more); more;) {
        size_t mark = p->used;
        char *key, *dt, buf[SHOWN_MAX + 4];
        if ((st = jp_key(p, &key))) return st;
        int *seen = strcmp(key, "dtype") == 0          ? &have_dtype
                    : strcmp(key, "shape") == 0        ? &have_shape
                    : strcmp(key, "data_offsets") == 0 ? &have_off
                                                       : NULL;
        if (seen && *seen) return tensor_err(p, nm, "duplicate key \"%s\"", key);
        if (seen) *seen = 1;
        if (seen == &have_dtype) {
            if (jp_peek(p) != '"') return tensor_err(p, nm, "dtype is not a string");
            if ((st = jp_string(p, &dt))) return st;
            if (clcnn_st_dtype_from_name(dt, &t->dtype) != 0)
                return tensor_err(p, nm, "unknown dtype \"%s\"", shown(dt, buf));
        } else if (seen) {
            if (jp_peek(p) != '[') return tensor_err(p, nm, "%s is not an array", key);
            if ((st = jp_ints(p, 3, seen == &have_shape ? &shape : &off))) return st;
        } else if ((st = jp_skip(p, 3))) {
            return st;
        }
        p->used = mark; /* the key and dtype strings were only needed here */
        if ((st = jp_next(p, '}', &more))) return st;
    }
    if (!have_dtype || !have_shape || !have_off)
        return tensor_err(p, nm, "missing \"%s\"",
                          !have_dtype   ? "dtype"
                          : !have_shape ? "shape"
                                        : "data_offsets");
    return check_tensor(p, t, &shape, &off, data_size);
}

static clcnn_status parse_meta(clcnn_st_file *f, jp *p) {
    clcnn_status st;
    int more, cap = 0;
    char buf[SHOWN_MAX + 4];
    int c = jp_peek(p);
    if (c == 'n') return jp_literal(p); /* null, or a syntax error: Python accepts null */
    if (c != '{')
        return clcnn_fail(p->e, CLCNN_ERR_FORMAT, "%s: __metadata__ is not an object", p->file);
    for (jp_open(p, '}', &more); more;) {
        char *k, *v;
        if ((st = jp_key(p, &k))) return st;
        if (jp_peek(p) != '"')
            return clcnn_fail(p->e, CLCNN_ERR_FORMAT,
                              "%s: __metadata__ value for key '%s' is not a string", p->file,
                              shown(k, buf));
        if ((st = jp_string(p, &v))) return st;
        if (f->nmeta == cap) {
            int kcap = cap;
            void *q = grow(f->meta_keys, &kcap, sizeof *f->meta_keys);
            if (!q) return oom(p);
            f->meta_keys = q;
            if (!(q = grow(f->meta_values, &cap, sizeof *f->meta_values))) return oom(p);
            f->meta_values = q;
        }
        f->meta_keys[f->nmeta] = k;
        f->meta_values[f->nmeta++] = v;
        if ((st = jp_next(p, '}', &more))) return st;
    }
    return CLCNN_SUCCESS;
}

static clcnn_status parse_header(clcnn_st_file *f, jp *p, size_t data_size) {
    clcnn_status st;
    int more, cap = 0, seen_meta = 0;
    if (jp_peek(p) != '{') return jp_err(p, "the header is not a JSON object");
    for (jp_open(p, '}', &more); more;) {
        size_t mark = p->used;
        char *key;
        if ((st = jp_key(p, &key))) return st;
        if (strcmp(key, "__metadata__") == 0) {
            if (seen_meta)
                return clcnn_fail(p->e, CLCNN_ERR_FORMAT, "%s: duplicate __metadata__", p->file);
            seen_meta = 1;
            p->used = mark;
            if ((st = parse_meta(f, p))) return st;
        } else {
            if (f->ntensors == cap) {
                void *q = grow(f->tensors, &cap, sizeof *f->tensors);
                if (!q) return oom(p);
                f->tensors = q;
            }
            clcnn_st_tensor *t = &f->tensors[f->ntensors++];
            memset(t, 0, sizeof *t);
            t->name = key;
            if ((st = parse_tensor(p, t, data_size))) return st;
        }
        if ((st = jp_next(p, '}', &more))) return st;
    }
    if (jp_peek(p) != -1) return jp_err(p, "unexpected data after the header object");
    return CLCNN_SUCCESS;
}

static int cmp_name(const void *a, const void *b) {
    const clcnn_st_tensor *x = *(clcnn_st_tensor *const *)a, *y = *(clcnn_st_tensor *const *)b;
    return strcmp(x->name, y->name);
}

static int cmp_offset(const void *a, const void *b) {
    const clcnn_st_tensor *x = *(clcnn_st_tensor *const *)a, *y = *(clcnn_st_tensor *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Duplicate names and overlaps, found by sorting so that 10^5 tensors stay cheap. Also
 * builds the by-name index clcnn_st_find searches. */
static clcnn_status check_unique(clcnn_st_file *f, const jp *p) {
    clcnn_status st = CLCNN_SUCCESS;
    clcnn_st_tensor **order = NULL;
    char **keys = NULL, b1[SHOWN_MAX + 4], b2[SHOWN_MAX + 4];
    size_t n = (size_t)f->ntensors, m = 0;
    if (n) {
        f->by_name = malloc(n * sizeof *f->by_name);
        order = malloc(n * sizeof *order);
        if (!f->by_name || !order) {
            st = oom(p);
            goto fail;
        }
    }
    for (size_t i = 0; i < n; i++) {
        f->by_name[i] = &f->tensors[i];
        if (f->tensors[i].end > f->tensors[i].begin) order[m++] = &f->tensors[i];
    }
    if (n) qsort(f->by_name, n, sizeof *f->by_name, cmp_name);
    for (size_t i = 1; i < n; i++) {
        if (strcmp(f->by_name[i - 1]->name, f->by_name[i]->name) == 0) {
            st = clcnn_fail(p->e, CLCNN_ERR_FORMAT, "%s: duplicate tensor name '%s'", p->file,
                            shown(f->by_name[i]->name, b1));
            goto fail;
        }
    }
    /* Empty tensors occupy no bytes, so they cannot overlap anything; leave them out. */
    if (m) qsort(order, m, sizeof *order, cmp_offset);
    for (size_t i = 1; i < m; i++) {
        if (order[i]->begin < order[i - 1]->end) {
            st = clcnn_fail(p->e, CLCNN_ERR_FORMAT,
                            "%s: tensors '%s' [%zu, %zu) and '%s' [%zu, %zu) overlap", p->file,
                            shown(order[i - 1]->name, b1), order[i - 1]->begin, order[i - 1]->end,
                            shown(order[i]->name, b2), order[i]->begin, order[i]->end);
            goto fail;
        }
    }
    if (f->nmeta > 1) {
        size_t k = (size_t)f->nmeta;
        if (!(keys = malloc(k * sizeof *keys))) {
            st = oom(p);
            goto fail;
        }
        memcpy(keys, f->meta_keys, k * sizeof *keys);
        qsort(keys, k, sizeof *keys, cmp_str);
        for (size_t i = 1; i < k; i++) {
            if (strcmp(keys[i - 1], keys[i]) == 0) {
                st = clcnn_fail(p->e, CLCNN_ERR_FORMAT, "%s: duplicate __metadata__ key '%s'",
                                p->file, shown(keys[i], b1));
                goto fail;
            }
        }
    }
fail: /* success falls through: the cleanup is the same */
    free(order);
    free(keys);
    return st;
}

/* ---------------------------------------------------------------------------------------- */
/* Reading                                                                                    */

/* The header length a file of `size` bytes starting with buf[0..8) declares, checked against
 * what follows it. */
static clcnn_status header_length(const unsigned char *buf, size_t size, const char *name,
                                  uint64_t *hlen, clcnn_error *e) {
    if (size < 8)
        return clcnn_fail(e, CLCNN_ERR_FORMAT,
                          "%s: file is %zu bytes, shorter than the 8-byte header length", name,
                          size);
    *hlen = 0;
    for (int i = 7; i >= 0; i--)
        *hlen = *hlen << 8 | buf[i];
    if (*hlen > size - 8)
        return clcnn_fail(e, CLCNN_ERR_FORMAT,
                          "%s: header length %" PRIu64 " exceeds the %zu bytes that follow it",
                          name, *hlen, size - 8);
    return CLCNN_SUCCESS;
}

/* Parses the image in buf (size bytes) of a file of file_size bytes: the whole file, or (for
 * clcnn_st_read_header) only its length and header, with offsets checked against the file. */
static clcnn_status parse_image(clcnn_st_file *f, const unsigned char *buf, size_t size,
                                size_t file_size, const char *name, clcnn_error *e) {
    clcnn_status st;
    jp p;
    uint64_t hlen = 0;
    memset(f, 0, sizeof *f);
    if ((st = header_length(buf, size, name, &hlen, e))) goto fail;
    f->bytes = buf;
    f->size = size;
    f->data_start = 8 + (size_t)hlen;
    if (!(f->strings = malloc((size_t)hlen + 1))) {
        st = clcnn_fail(e, CLCNN_ERR_OUT_OF_HOST_MEMORY, "%s: out of memory", name);
        goto fail;
    }
    p = (jp){.s = buf + 8,
             .n = (size_t)hlen,
             .arena = f->strings,
             .cap = (size_t)hlen + 1,
             .file = name,
             .e = e};
    if ((st = parse_header(f, &p, file_size - f->data_start))) goto fail;
    if ((st = check_unique(f, &p))) goto fail;
    return CLCNN_SUCCESS;
fail:
    clcnn_st_free(f);
    return st;
}

clcnn_status clcnn_st_parse(clcnn_st_file *f, const unsigned char *buf, size_t size,
                            const char *name, clcnn_error *e) {
    if (!f || (!buf && size))
        return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT, "clcnn_st_parse: NULL argument");
    return parse_image(f, buf, size, size, name ? name : "<memory>", e);
}

/* Opens path for reading without following it into something that never ends or blocks: it must
 * be a regular file (not /dev/zero, a FIFO or a folder) of at most max bytes. */
static clcnn_status open_regular(const char *path, size_t max, int *fd_out, size_t *size,
                                 clcnn_error *e) {
    struct stat sb;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return clcnn_fail(e, CLCNN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fd, &sb) != 0) {
        int err = errno;
        close(fd);
        return clcnn_fail(e, CLCNN_ERR_IO, "%s: cannot open: %s", path, strerror(err));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return clcnn_fail(e, CLCNN_ERR_IO, "%s: not a regular file (%s)", path,
                          S_ISDIR(sb.st_mode)    ? "a directory"
                          : S_ISCHR(sb.st_mode)  ? "a character device"
                          : S_ISFIFO(sb.st_mode) ? "a pipe"
                                                 : "not a plain file");
    }
    if ((uintmax_t)sb.st_size > (uintmax_t)max) {
        close(fd);
        return clcnn_fail(e, CLCNN_ERR_FORMAT,
                          "%s: %jd bytes, more than the %zu that such a file can need", path,
                          (intmax_t)sb.st_size, max);
    }
    *fd_out = fd;
    *size = (size_t)sb.st_size;
    return CLCNN_SUCCESS;
}

/* Reads exactly n bytes at offset off; a file that shrank meanwhile is an error. */
static clcnn_status read_at(int fd, const char *path, unsigned char *buf, size_t n, size_t off,
                            clcnn_error *e) {
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(fd, buf + got, n - got, (off_t)(off + got));
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return clcnn_fail(e, CLCNN_ERR_IO, "%s: read failed: %s", path, strerror(errno));
        if (k == 0)
            return clcnn_fail(e, CLCNN_ERR_IO, "%s: the file shrank while being read", path);
        got += (size_t)k;
    }
    return CLCNN_SUCCESS;
}

/* Reads a regular file of at most max bytes, all of it or (header_only) its length and
 * header, and parses that with offsets checked against the whole file. */
static clcnn_status read_file(clcnn_st_file *f, const char *path, size_t max, int header_only,
                              clcnn_error *e) {
    clcnn_status st;
    unsigned char len8[8], *buf = NULL;
    size_t size = 0, n;
    uint64_t hlen = 0;
    int fd = -1;
    if (!f || !path)
        return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT, "clcnn_st_read: NULL argument");
    memset(f, 0, sizeof *f);
    if ((st = open_regular(path, max, &fd, &size, e))) return st;
    n = size;
    if (header_only) {
        if ((st = read_at(fd, path, len8, size < 8 ? size : 8, 0, e))) goto fail;
        if ((st = header_length(len8, size, path, &hlen, e))) goto fail;
        if (hlen > CLCNN_ST_MAX_HEADER) {
            st = clcnn_fail(e, CLCNN_ERR_FORMAT, "%s: header length %" PRIu64 " is over %d bytes",
                            path, hlen, CLCNN_ST_MAX_HEADER);
            goto fail;
        }
        n = 8 + (size_t)hlen;
    }
    if (!(buf = malloc(n ? n : 1))) {
        st = clcnn_fail(e, CLCNN_ERR_OUT_OF_HOST_MEMORY, "%s: out of memory", path);
        goto fail;
    }
    if ((st = read_at(fd, path, buf, n, 0, e))) goto fail;
    close(fd);
    fd = -1;
    if ((st = parse_image(f, buf, n, size, path, e))) goto fail;
    f->owned = buf;
    return CLCNN_SUCCESS;
fail:
    if (fd >= 0) close(fd);
    free(buf);
    return st;
}

clcnn_status clcnn_st_read_max(clcnn_st_file *f, const char *path, size_t max, clcnn_error *e) {
    return read_file(f, path, max, 0, e);
}

clcnn_status clcnn_st_read(clcnn_st_file *f, const char *path, clcnn_error *e) {
    return read_file(f, path, SIZE_MAX, 0, e);
}

clcnn_status clcnn_st_read_header(clcnn_st_file *f, const char *path, clcnn_error *e) {
    return read_file(f, path, SIZE_MAX, 1, e);
}

const clcnn_st_tensor *clcnn_st_find(const clcnn_st_file *f, const char *name) {
    if (!f || !name) return NULL;
    size_t lo = 0, hi = (size_t)f->ntensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, f->by_name[mid]->name);
        if (c == 0) return f->by_name[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

const void *clcnn_st_data(const clcnn_st_file *f, const clcnn_st_tensor *t) {
    return f->bytes + f->data_start + t->begin;
}

const char *clcnn_st_meta(const clcnn_st_file *f, const char *key) {
    if (!f || !key) return NULL;
    for (int i = 0; i < f->nmeta; i++)
        if (strcmp(f->meta_keys[i], key) == 0) return f->meta_values[i];
    return NULL;
}

void clcnn_st_free(clcnn_st_file *f) {
    if (!f) return;
    free(f->tensors);
    free(f->meta_keys);
    free(f->meta_values);
    free(f->strings);
    free(f->by_name);
    free(f->owned);
    memset(f, 0, sizeof *f);
}

/* ---------------------------------------------------------------------------------------- */
/* Writing                                                                                    */

typedef struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (n > b->cap - b->len) {
        size_t c = b->cap ? b->cap : 1024;
        while (c - b->len < n) {
            if (c > SIZE_MAX / 2) {
                b->oom = 1;
                return;
            }
            c *= 2;
        }
        char *q = realloc(b->p, c);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = c;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void sb_str(sbuf *b, const char *s) {
    sb_put(b, s, strlen(s));
}

static void sb_u64(sbuf *b, uint64_t v) {
    char t[24];
    int k = snprintf(t, sizeof t, "%" PRIu64, v);
    sb_put(b, t, (size_t)k);
}

/* Escapes what JSON requires and no more, as serde_json does: quote, backslash, controls. */
static void sb_json(sbuf *b, const char *s) {
    sb_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        const char *named = c == '"'    ? "\\\""
                            : c == '\\' ? "\\\\"
                            : c == '\n' ? "\\n"
                            : c == '\r' ? "\\r"
                            : c == '\t' ? "\\t"
                            : c == '\b' ? "\\b"
                            : c == '\f' ? "\\f"
                                        : NULL;
        if (named) {
            sb_str(b, named);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            sb_str(b, esc);
        } else {
            sb_put(b, s, 1);
        }
    }
    sb_put(b, "\"", 1);
}

/* Byte length of an entry's data, or -1 for a bad dtype, ndim, dimension or an overflow. */
static int entry_bytes(const clcnn_st_entry *en, uint64_t *out) {
    if ((unsigned)en->dtype >= CLCNN_ST_NDTYPES || en->ndim < 0 || en->ndim > CLCNN_ST_MAX_DIMS)
        return -1;
    uint64_t count = 1, esize = clcnn_st_dtype_size(en->dtype);
    for (int i = 0; i < en->ndim; i++) {
        if (en->shape[i] < 0) return -1;
        uint64_t d = (uint64_t)en->shape[i];
        if (d != 0 && count > UINT64_MAX / d) return -1;
        count *= d;
    }
    if (count > UINT64_MAX / esize) return -1;
    *out = count * esize;
    return 0;
}

/* Rejects what would make a file that clcnn or Python cannot read back (the reader takes
 * offsets up to INT64_MAX, hence the limit on the running total). */
static clcnn_status check_entries(const char *path, const clcnn_st_entry *entries, int n,
                                  const char *const *meta, int n_meta, clcnn_error *e) {
    clcnn_status st = CLCNN_SUCCESS;
    const char **names = NULL;
    char buf[SHOWN_MAX + 4];
    uint64_t total = 0;
    if (n < 0 || n_meta < 0 || (n && !entries) || (n_meta && !meta))
        return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT, "%s: bad tensor or metadata count", path);
    for (int i = 0; i < n; i++) {
        const clcnn_st_entry *en = &entries[i];
        uint64_t bytes = 0;
        if (!en->name || !utf8_valid(en->name) || strcmp(en->name, "__metadata__") == 0)
            return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT,
                              "%s: tensor %d: name is NULL, not UTF-8 or reserved", path, i);
        if (entry_bytes(en, &bytes) || (bytes && !en->data) || bytes > INT64_MAX - total)
            return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT,
                              "%s: tensor '%s': bad dtype, shape or data pointer", path,
                              shown(en->name, buf));
        total += bytes;
    }
    for (int i = 0; i < 2 * n_meta; i++)
        if (!meta[i] || !utf8_valid(meta[i]))
            return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT,
                              "%s: metadata string %d is NULL or not UTF-8", path, i);
    size_t k = (size_t)(n > n_meta ? n : n_meta);
    if (k && !(names = malloc(k * sizeof *names)))
        return clcnn_fail(e, CLCNN_ERR_OUT_OF_HOST_MEMORY, "%s: out of memory", path);
    for (int pass = 0; pass < 2 && !st; pass++) {
        size_t m = (size_t)(pass ? n_meta : n);
        for (size_t i = 0; i < m; i++)
            names[i] = pass ? meta[2 * i] : entries[i].name;
        if (m) qsort(names, m, sizeof *names, cmp_str);
        for (size_t i = 1; i < m && !st; i++)
            if (strcmp(names[i - 1], names[i]) == 0)
                st = clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT, "%s: duplicate %s '%s'", path,
                                pass ? "metadata key" : "tensor name", shown(names[i], buf));
    }
    free(names);
    return st;
}

/* The header: metadata first, then the tensors in the caller's order, padded with spaces so
 * the data buffer starts 8-byte aligned (and because the Python writer does the same). */
static void build_header(sbuf *b, const clcnn_st_entry *entries, int n, const char *const *meta,
                         int n_meta) {
    uint64_t off = 0;
    sb_put(b, "{", 1);
    if (n_meta) {
        sb_str(b, "\"__metadata__\":{");
        for (int i = 0; i < n_meta; i++) {
            if (i) sb_put(b, ",", 1);
            sb_json(b, meta[2 * i]);
            sb_put(b, ":", 1);
            sb_json(b, meta[2 * i + 1]);
        }
        sb_str(b, n ? "}," : "}");
    }
    for (int i = 0; i < n; i++) {
        const clcnn_st_entry *en = &entries[i];
        uint64_t bytes = 0;
        entry_bytes(en, &bytes); /* checked, with the running total, by check_entries */
        if (i) sb_put(b, ",", 1);
        sb_json(b, en->name);
        sb_str(b, ":{\"dtype\":\"");
        sb_str(b, clcnn_st_dtype_name(en->dtype));
        sb_str(b, "\",\"shape\":[");
        for (int d = 0; d < en->ndim; d++) {
            if (d) sb_put(b, ",", 1);
            sb_u64(b, (uint64_t)en->shape[d]);
        }
        sb_str(b, "],\"data_offsets\":[");
        sb_u64(b, off);
        sb_put(b, ",", 1);
        sb_u64(b, off + bytes);
        sb_str(b, "]}");
        off += bytes;
    }
    sb_put(b, "}", 1);
    while (!b->oom && b->len % 8)
        sb_put(b, " ", 1);
}

clcnn_status clcnn_st_write_tmp(const char *path, const clcnn_st_entry *entries, int n,
                                const char *const *meta, int n_meta, clcnn_tmpfile *tmp_out,
                                clcnn_error *e) {
    clcnn_status st;
    sbuf hdr = {0};
    clcnn_piece *pieces = NULL;
    unsigned char len8[8];
    if (!path || !tmp_out)
        return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT, "clcnn_st_write: NULL path");
    *tmp_out = (clcnn_tmpfile){NULL, -1};
    if ((st = check_entries(path, entries, n, meta, n_meta, e))) return st;
    build_header(&hdr, entries, n, meta, n_meta);
    pieces = malloc(((size_t)n + 2) * sizeof *pieces);
    if (hdr.oom || !pieces) {
        free(hdr.p);
        free(pieces);
        return clcnn_fail(e, CLCNN_ERR_OUT_OF_HOST_MEMORY, "%s: out of memory", path);
    }
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)((uint64_t)hdr.len >> (8 * i));
    pieces[0] = (clcnn_piece){len8, 8};
    pieces[1] = (clcnn_piece){hdr.p, hdr.len};
    for (int i = 0; i < n; i++) {
        uint64_t bytes = 0;
        entry_bytes(&entries[i], &bytes); /* checked by check_entries */
        pieces[i + 2] = (clcnn_piece){entries[i].data, (size_t)bytes};
    }
    st = clcnn_write_tmp(path, pieces, n + 2, 1, tmp_out, e);
    free(pieces);
    free(hdr.p);
    return st;
}

clcnn_status clcnn_st_commit(clcnn_tmpfile *tmp, const char *path, clcnn_error *e) {
    if (!tmp || !tmp->name || !path)
        return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT, "clcnn_st_commit: NULL path");
    return clcnn_tmp_rename(tmp, path, e);
}

clcnn_status clcnn_st_write(const char *path, const clcnn_st_entry *entries, int n,
                            const char *const *meta, int n_meta, clcnn_error *e) {
    clcnn_tmpfile tmp;
    clcnn_status st = clcnn_st_write_tmp(path, entries, n, meta, n_meta, &tmp, e);
    if (st == CLCNN_SUCCESS) st = clcnn_st_commit(&tmp, path, e);
    return st;
}
