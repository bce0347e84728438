/* Model spec parser (text -> flat layer list), the presets, and the canonical text of a layer
 * list. A hand-written recursive descent over bytes: it will be fuzzed, so every read is
 * checked against the length, numbers saturate instead of overflowing, and repetition is
 * expanded into a fixed-size array that is checked before every copy. */
#include "spec.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------- */
/* Tables                                                                                     */

typedef struct spec_preset {
    const char *name;
    const char *text;
} spec_preset;

static const spec_preset presets[] = {
    /* The CIFAR-10 network of a popular PyTorch tutorial (not the pytorch.org one). It has no
     * activations, so it is a stack of linear maps; seed-relu is the same with ReLUs. */
    {"seed", "conv(32,5,pad=2) maxpool(2) conv(32,5,pad=2) maxpool(2) conv(64,5,pad=2) "
             "maxpool(2) flatten linear(64) linear(10)"},
    {"seed-relu", "conv(32,5,pad=2) relu maxpool(2) conv(32,5,pad=2) relu maxpool(2) "
                  "conv(64,5,pad=2) relu maxpool(2) flatten linear(64) relu linear(10)"},
};
#define N_PRESETS ((int)(sizeof presets / sizeof presets[0]))

/* Every integer a layer takes lives in one of these slots, whether written positionally or
 * by keyword, so duplicate and range checks are written once. */
enum { SLOT_OUT, SLOT_KERNEL, SLOT_STRIDE, SLOT_PAD, SLOT_BIAS, SLOT_COUNT };

typedef struct slot_info {
    const char *name;
    int min, max;
} slot_info;

static const slot_info slots[SLOT_COUNT] = {
    {"out", 1, 65536}, {"kernel", 1, 64}, {"stride", 1, 64}, {"pad", 0, 64}, {"bias", 0, 1},
};

typedef struct spec_keyword {
    const char *name;
    int slot;
} spec_keyword;

static const spec_keyword keywords[] = {
    {"stride", SLOT_STRIDE},
    {"pad", SLOT_PAD},
    {"padding", SLOT_PAD},
    {"bias", SLOT_BIAS},
};
#define N_KEYWORDS ((int)(sizeof keywords / sizeof keywords[0]))

#define KW(slot) (1u << (slot))

typedef struct layer_schema {
    const char *name; /* canonical: what clcnn_spec_format writes and messages say */
    int npos, nreq;   /* positional arguments accepted, and how many of them are required */
    int pos[4];       /* slot of each positional argument, in order */
    unsigned kw;      /* KW(slot) for each slot that may also be given by keyword */
    const char *pos_list, *req_list, *kw_list; /* for messages */
} layer_schema;

/* Indexed by clcnn_layer_kind. */
static const layer_schema schemas[] = {
    [CLCNN_LAYER_CONV2D] = {.name = "conv",
                            .npos = 4,
                            .nreq = 2,
                            .pos = {SLOT_OUT, SLOT_KERNEL, SLOT_STRIDE, SLOT_PAD},
                            .kw = KW(SLOT_STRIDE) | KW(SLOT_PAD) | KW(SLOT_BIAS),
                            .pos_list = "out, kernel, stride, pad",
                            .req_list = "out, kernel",
                            .kw_list = "stride, pad, padding, bias"},
    [CLCNN_LAYER_MAXPOOL2D] = {.name = "maxpool",
                               .npos = 3,
                               .nreq = 1,
                               .pos = {SLOT_KERNEL, SLOT_STRIDE, SLOT_PAD},
                               .kw = KW(SLOT_STRIDE) | KW(SLOT_PAD),
                               .pos_list = "kernel, stride, pad",
                               .req_list = "kernel",
                               .kw_list = "stride, pad, padding"},
    [CLCNN_LAYER_RELU] = {.name = "relu"},
    [CLCNN_LAYER_FLATTEN] = {.name = "flatten"},
    [CLCNN_LAYER_LINEAR] = {.name = "linear",
                            .npos = 1,
                            .nreq = 1,
                            .pos = {SLOT_OUT},
                            .kw = KW(SLOT_BIAS),
                            .pos_list = "out",
                            .req_list = "out",
                            .kw_list = "bias"},
};

typedef struct layer_alias {
    const char *name;
    clcnn_layer_kind kind;
} layer_alias;

static const layer_alias layer_names[] = {
    {"conv", CLCNN_LAYER_CONV2D},       {"conv2d", CLCNN_LAYER_CONV2D},
    {"maxpool", CLCNN_LAYER_MAXPOOL2D}, {"maxpool2d", CLCNN_LAYER_MAXPOOL2D},
    {"mp", CLCNN_LAYER_MAXPOOL2D},      {"relu", CLCNN_LAYER_RELU},
    {"flatten", CLCNN_LAYER_FLATTEN},   {"linear", CLCNN_LAYER_LINEAR},
    {"fc", CLCNN_LAYER_LINEAR},
};
#define N_LAYER_NAMES ((int)(sizeof layer_names / sizeof layer_names[0]))

/* ---------------------------------------------------------------------------------------- */
/* Characters                                                                                 */

/* Own ASCII classes: <ctype.h> depends on the locale and is undefined for negative chars. */
static int is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static int is_digit(char c) {
    return c >= '0' && c <= '9';
}

static char lower(char c) {
    return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

/* Ends a word: a layer name, a keyword or a number. '*' and '-' are not delimiters, so
 * "conv-2d" and "3*2" are reported whole. */
static int is_delim(char c) {
    return is_space(c) || c == ',' || c == '(' || c == ')' || c == '=' || c == '\0';
}

/* s[0..len) equals the lowercase NUL-terminated word, ignoring ASCII case. */
static int word_is(const char *s, size_t len, const char *word) {
    for (size_t i = 0; i < len; i++)
        if (word[i] == '\0' || lower(s[i]) != word[i]) return 0;
    return word[len] == '\0';
}

/* ---------------------------------------------------------------------------------------- */
/* Parser state and messages                                                                  */

#define NO_GROUP ((size_t)-1)
#define QUOTE_MAX 160 /* longest piece of spec quoted in a message */
#define TOKEN_MAX 24  /* longest token quoted in a message */

typedef struct parser {
    const char *s;         /* the text: the spec, or a preset's text */
    size_t len;            /* strlen(s), at most CLCNN_SPEC_MAX_LEN */
    size_t i;              /* cursor */
    clcnn_layer_desc *out; /* CLCNN_SPEC_MAX_LAYERS entries */
    int n;                 /* layers in out so far, repetitions expanded */
    int depth;             /* repetition groups currently open */
    clcnn_error *e;
} parser;

static char cur(const parser *p) {
    return p->i < p->len ? p->s[p->i] : '\0';
}

static size_t skip_ws(parser *p) {
    size_t from = p->i;
    while (p->i < p->len && is_space(p->s[p->i]))
        p->i++;
    return p->i - from;
}

static size_t word_end(const parser *p, size_t from) {
    while (from < p->len && !is_delim(p->s[from]))
        from++;
    return from;
}

/* Copies s[0..len) into buf for quoting, one byte to one byte so columns still line up:
 * whitespace becomes ' ' (the message stays on one line) and other non-printable bytes '?'. */
static void sanitize(char *buf, const char *s, size_t len) {
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        buf[i] = is_space((char)c) ? ' ' : (c < 0x20 || c >= 0x7f) ? '?' : (char)c;
    }
    buf[len] = '\0';
}

/* A token of the spec in quotes, cut at TOKEN_MAX characters. */
static const char *quote_token(char *buf, const char *s, size_t len) {
    size_t k = len > TOKEN_MAX ? TOKEN_MAX : len;
    buf[0] = '\'';
    sanitize(buf + 1, s, k);
    strcpy(buf + 1 + k, len > k ? "...'" : "'");
    return buf;
}

/* What sits at offset `at`, for "got ..." in messages. buf holds at least TOKEN_MAX + 8. */
static const char *describe(const parser *p, size_t at, char *buf) {
    if (at >= p->len) return "end of spec";
    return quote_token(buf, p->s + at, 1);
}

/* Records "model spec, column C: <what> (in "<spec>")" and returns CLCNN_ERR_SPEC. A long spec
 * is quoted as a window around the column. */
static clcnn_status fail_at(const parser *p, size_t at, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static clcnn_status fail_at(const parser *p, size_t at, const char *fmt, ...) {
    char what[512], quote[QUOTE_MAX + 1];
    size_t from = 0, len = p->len;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (len > QUOTE_MAX) {
        from = at > QUOTE_MAX / 2 ? at - QUOTE_MAX / 2 : 0;
        if (from > p->len - QUOTE_MAX) from = p->len - QUOTE_MAX;
        len = QUOTE_MAX;
    }
    sanitize(quote, p->s + from, len);
    return clcnn_fail(p->e, CLCNN_ERR_SPEC, "model spec, column %zu: %s (in \"%s%s%s\")", at + 1,
                      what, from > 0 ? "..." : "", quote, from + len < p->len ? "..." : "");
}

/* Reads the decimal integer s[at..at+len) into *out and checks it against min..max. Digits
 * past 10^8 no longer change the value: every limit is far below, so "too large" is still
 * reported and nothing can overflow. */
static clcnn_status read_int(const parser *p, const char *what, int min, int max, size_t at,
                             size_t len, int *out) {
    char tok[TOKEN_MAX + 8];
    int v = 0;
    int is_flag = min == 0 && max == 1; /* bias: say "0 or 1", not "too large" */
    const char *expects = is_flag ? "0 or 1" : "a non-negative integer";
    if (len == 0)
        return fail_at(p, at, "%s expects %s, got %s", what, expects, describe(p, at, tok));
    for (size_t k = 0; k < len; k++) {
        char c = p->s[at + k];
        if (!is_digit(c))
            return fail_at(p, at, "%s expects %s, got %s", what, expects,
                           quote_token(tok, p->s + at, len));
        if (v < 100000000) v = v * 10 + (c - '0');
    }
    if (is_flag && v > 1)
        return fail_at(p, at, "%s expects %s, got %s", what, expects,
                       quote_token(tok, p->s + at, len));
    if (v > max)
        return fail_at(p, at, "%s %s is too large (at most %d)", what,
                       quote_token(tok, p->s + at, len), max);
    if (v < min) return fail_at(p, at, "%s must be in %d..%d, got %d", what, min, max, v);
    *out = v;
    return CLCNN_SUCCESS;
}

/* ---------------------------------------------------------------------------------------- */
/* Layers                                                                                     */

enum { ARG_UNSET, ARG_POS, ARG_KW };

typedef struct layer_args {
    int val[SLOT_COUNT];
    int how[SLOT_COUNT];    /* ARG_* */
    size_t col[SLOT_COUNT]; /* offset of the value, for checks made after the list is read */
    int npos;
} layer_args;

static int find_keyword(const char *s, size_t len) {
    for (int k = 0; k < N_KEYWORDS; k++)
        if (word_is(s, len, keywords[k].name)) return keywords[k].slot;
    return -1;
}

/* One argument, the cursor on its first byte: "INT" or "KEY = INT". */
static clcnn_status parse_arg(parser *p, const layer_schema *ls, layer_args *a, int *seen_kw) {
    char tok[TOKEN_MAX + 8];
    size_t at = p->i, end = word_end(p, at);
    int slot;
    p->i = end;
    skip_ws(p);
    if (cur(p) == '=') {
        if (end == at) return fail_at(p, p->i, "expected a keyword name before '='");
        slot = find_keyword(p->s + at, end - at);
        if (slot < 0 || !(ls->kw & KW(slot)))
            return fail_at(p, at, "%s has no keyword %s (it takes %s)", ls->name,
                           quote_token(tok, p->s + at, end - at), ls->kw_list);
        if (a->how[slot] == ARG_KW) return fail_at(p, at, "%s given twice", slots[slot].name);
        if (a->how[slot] == ARG_POS)
            return fail_at(p, at, "%s given both positionally and by keyword", slots[slot].name);
        p->i++;
        skip_ws(p);
        at = p->i;
        end = word_end(p, at);
        p->i = end;
        *seen_kw = 1;
        a->how[slot] = ARG_KW;
    } else {
        if (end == at) return fail_at(p, at, "expected an argument, got %s", describe(p, at, tok));
        if (*seen_kw) return fail_at(p, at, "positional argument after keyword arguments");
        if (a->npos >= ls->npos)
            return fail_at(p, at, "%s takes at most %d positional argument%s (%s)", ls->name,
                           ls->npos, ls->npos == 1 ? "" : "s", ls->pos_list);
        slot = ls->pos[a->npos++];
        a->how[slot] = ARG_POS;
    }
    a->col[slot] = at;
    return read_int(p, slots[slot].name, slots[slot].min, slots[slot].max, at, end - at,
                    &a->val[slot]);
}

/* "( [arg {, arg}] )", the cursor on '('. */
static clcnn_status parse_args(parser *p, const layer_schema *ls, layer_args *a) {
    char tok[TOKEN_MAX + 8];
    size_t open = p->i++;
    int seen_kw = 0;
    clcnn_status st;
    skip_ws(p);
    if (cur(p) == ')') {
        p->i++;
        return CLCNN_SUCCESS;
    }
    if (ls->npos == 0 && ls->kw == 0) return fail_at(p, p->i, "%s takes no arguments", ls->name);
    for (;;) {
        skip_ws(p);
        st = parse_arg(p, ls, a, &seen_kw);
        if (st != CLCNN_SUCCESS) return st;
        skip_ws(p);
        if (p->i >= p->len)
            return fail_at(p, p->i, "missing ')' to close the arguments of %s opened at column %zu",
                           ls->name, open + 1);
        if (cur(p) == ')') {
            p->i++;
            return CLCNN_SUCCESS;
        }
        if (cur(p) != ',')
            return fail_at(p, p->i, "expected ',' or ')' in the arguments of %s, got %s", ls->name,
                           describe(p, p->i, tok));
        p->i++;
    }
}

static clcnn_status unknown_layer(const parser *p, size_t at, size_t end) {
    char tok[TOKEN_MAX + 8];
    quote_token(tok, p->s + at, end - at);
    for (int k = 0; k < N_PRESETS; k++)
        if (word_is(p->s + at, end - at, presets[k].name))
            return fail_at(p, at, "unknown layer %s (a preset name must be the whole spec)", tok);
    return fail_at(p, at, "unknown layer %s (expected conv, maxpool, relu, flatten or linear)",
                   tok);
}

/* "NAME [( args )]", the cursor on the name. */
static clcnn_status parse_layer(parser *p) {
    size_t start = p->i, end = word_end(p, start);
    const layer_schema *ls = NULL;
    layer_args a;
    clcnn_layer_desc d;
    clcnn_layer_kind kind = CLCNN_LAYER_RELU;
    clcnn_status st;
    for (int k = 0; k < N_LAYER_NAMES && !ls; k++) {
        if (word_is(p->s + start, end - start, layer_names[k].name)) {
            kind = layer_names[k].kind;
            ls = &schemas[kind];
        }
    }
    if (!ls) return unknown_layer(p, start, end);
    memset(&a, 0, sizeof a);
    p->i = end;
    skip_ws(p);
    if (cur(p) == '(') {
        st = parse_args(p, ls, &a);
        if (st != CLCNN_SUCCESS) return st;
    } else {
        p->i = end; /* the whitespace separates this layer from the next: leave it */
    }
    if (a.npos < ls->nreq)
        return fail_at(p, start, "%s needs %s%d positional argument%s (%s), got %d", ls->name,
                       ls->npos > ls->nreq ? "at least " : "", ls->nreq, ls->nreq == 1 ? "" : "s",
                       ls->req_list, a.npos);
    if (p->n >= CLCNN_SPEC_MAX_LAYERS)
        return fail_at(p, start, "more than %d layers", CLCNN_SPEC_MAX_LAYERS);

    memset(&d, 0, sizeof d);
    d.kind = kind;
    d.pos = (int)start + 1;
    switch (kind) {
    case CLCNN_LAYER_CONV2D:
        d.out = a.val[SLOT_OUT];
        d.kernel = a.val[SLOT_KERNEL];
        d.stride = a.how[SLOT_STRIDE] ? a.val[SLOT_STRIDE] : 1;
        d.pad = a.val[SLOT_PAD];
        d.bias = a.how[SLOT_BIAS] ? a.val[SLOT_BIAS] : 1;
        break;
    case CLCNN_LAYER_MAXPOOL2D:
        d.kernel = a.val[SLOT_KERNEL];
        d.stride = a.how[SLOT_STRIDE] ? a.val[SLOT_STRIDE] : d.kernel;
        d.pad = a.val[SLOT_PAD];
        /* PyTorch refuses this only when the layer first runs; catching it here points at the
         * text instead. */
        if (d.pad > d.kernel / 2)
            return fail_at(p, a.col[SLOT_PAD],
                           "maxpool pad %d is more than half the kernel %d (PyTorch requires "
                           "pad <= kernel/2)",
                           d.pad, d.kernel);
        break;
    case CLCNN_LAYER_LINEAR:
        d.out = a.val[SLOT_OUT];
        d.bias = a.how[SLOT_BIAS] ? a.val[SLOT_BIAS] : 1;
        break;
    case CLCNN_LAYER_RELU:
    case CLCNN_LAYER_FLATTEN: break;
    }
    p->out[p->n++] = d;
    return CLCNN_SUCCESS;
}

static clcnn_status parse_list(parser *p, size_t open);

/* "N*( list )", the cursor on the first digit. The group is parsed once and its expanded
 * layers copied N-1 more times, checking the layer limit before each copy, so memory stays
 * bounded by CLCNN_SPEC_MAX_LAYERS however the groups nest. */
static clcnn_status parse_repeat(parser *p) {
    char tok[TOKEN_MAX + 8];
    size_t start = p->i, open;
    int count = 0, first, glen;
    clcnn_status st;
    while (p->i < p->len && is_digit(p->s[p->i]))
        p->i++;
    size_t digits = p->i - start;
    skip_ws(p);
    if (cur(p) != '*')
        return fail_at(p, p->i,
                       "expected '*' after the repeat count (a repetition is N*( layers )), "
                       "got %s",
                       describe(p, p->i, tok));
    p->i++;
    skip_ws(p);
    if (cur(p) != '(')
        return fail_at(p, p->i, "expected '(' after '*' (a repetition is N*( layers )), got %s",
                       describe(p, p->i, tok));
    st = read_int(p, "repeat count", 1, CLCNN_SPEC_MAX_REPEAT, start, digits, &count);
    if (st != CLCNN_SUCCESS) return st;
    if (p->depth >= CLCNN_SPEC_MAX_DEPTH)
        return fail_at(p, p->i, "repetition groups nest deeper than %d", CLCNN_SPEC_MAX_DEPTH);
    open = p->i++;
    first = p->n;
    p->depth++;
    st = parse_list(p, open);
    p->depth--;
    if (st != CLCNN_SUCCESS) return st;
    glen = p->n - first;
    for (int r = 1; r < count; r++) {
        if (glen > CLCNN_SPEC_MAX_LAYERS - p->n)
            return fail_at(p, start, "more than %d layers after expanding repetitions",
                           CLCNN_SPEC_MAX_LAYERS);
        memcpy(p->out + p->n, p->out + first, (size_t)glen * sizeof *p->out);
        p->n += glen;
    }
    return CLCNN_SUCCESS;
}

/* Layers separated by whitespace and/or one comma, up to the end of the text (open ==
 * NO_GROUP) or up to the ')' that closes the group whose '(' is at offset open. */
static clcnn_status parse_list(parser *p, size_t open) {
    char tok[TOKEN_MAX + 8];
    int items = 0, sep = 0, comma = 0;
    size_t comma_at = 0;
    clcnn_status st;
    skip_ws(p);
    for (;;) {
        char c = cur(p);
        int end = p->i >= p->len;
        if (end || c == ')') {
            if (comma) return fail_at(p, comma_at, "expected a layer after ','");
            if (end && open != NO_GROUP)
                return fail_at(p, p->i, "missing ')' to close the group opened at column %zu",
                               open + 1);
            if (!end && open == NO_GROUP)
                return fail_at(p, p->i, "unexpected ')' with no group open");
            if (items == 0)
                return open == NO_GROUP ? fail_at(p, 0, "empty spec, expected at least one layer")
                                        : fail_at(p, open, "empty repetition group");
            if (!end) p->i++;
            return CLCNN_SUCCESS;
        }
        if (items > 0 && !sep)
            return fail_at(p, p->i, "expected ',' or whitespace between layers, got %s",
                           describe(p, p->i, tok));
        if (is_digit(c))
            st = parse_repeat(p);
        else if (!is_delim(c))
            st = parse_layer(p);
        else
            st = fail_at(p, p->i, "expected a layer name, got %s", describe(p, p->i, tok));
        if (st != CLCNN_SUCCESS) return st;
        items++;
        sep = skip_ws(p) > 0;
        comma = cur(p) == ',';
        if (comma) {
            comma_at = p->i++;
            sep = 1;
            skip_ws(p);
        }
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Public entry points                                                                        */

/* Preset whose name is s[0..len) once surrounding whitespace is trimmed, or NULL. */
static const char *find_preset(const char *s, size_t len) {
    while (len > 0 && is_space(*s))
        s++, len--;
    while (len > 0 && is_space(s[len - 1]))
        len--;
    for (int k = 0; k < N_PRESETS; k++)
        if (word_is(s, len, presets[k].name)) return presets[k].text;
    return NULL;
}

const char *clcnn_spec_preset(const char *name) {
    if (!name) return NULL;
    for (int k = 0; k < N_PRESETS; k++)
        if (word_is(name, strlen(name), presets[k].name)) return presets[k].text;
    return NULL;
}

clcnn_status clcnn_spec_parse(const char *spec, clcnn_layer_desc **layers, int *n, clcnn_error *e) {
    /* Expansion happens here, on the stack, so a failed parse allocates nothing. */
    clcnn_layer_desc buf[CLCNN_SPEC_MAX_LAYERS];
    parser p;
    size_t len = 0;
    const char *preset;
    clcnn_status st;
    if (layers) *layers = NULL;
    if (n) *n = 0;
    if (!spec || !layers || !n)
        return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT, "clcnn_spec_parse: NULL argument");
    while (len <= CLCNN_SPEC_MAX_LEN && spec[len] != '\0')
        len++;
    if (len > CLCNN_SPEC_MAX_LEN)
        return clcnn_fail(e, CLCNN_ERR_SPEC, "model spec, column %d: longer than %d bytes",
                          CLCNN_SPEC_MAX_LEN + 1, CLCNN_SPEC_MAX_LEN);
    preset = find_preset(spec, len);
    if (preset) {
        spec = preset;
        len = strlen(preset);
    }
    memset(&p, 0, sizeof p);
    p.s = spec;
    p.len = len;
    p.out = buf;
    p.e = e;
    st = parse_list(&p, NO_GROUP);
    if (st != CLCNN_SUCCESS) return st;
    *layers = malloc((size_t)p.n * sizeof **layers);
    if (!*layers) return clcnn_fail(e, CLCNN_ERR_OUT_OF_HOST_MEMORY, "model spec: out of memory");
    memcpy(*layers, buf, (size_t)p.n * sizeof **layers);
    *n = p.n;
    return CLCNN_SUCCESS;
}

/* An snprintf that appends: counts what the full text needs and writes what fits. */
typedef struct spec_buf {
    char *buf;
    size_t size, len;
} spec_buf;

static void append(spec_buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void append(spec_buf *b, const char *fmt, ...) {
    size_t room = b->len < b->size ? b->size - b->len : 0;
    va_list ap;
    int k;
    va_start(ap, fmt);
    k = vsnprintf(room ? b->buf + b->len : NULL, room, fmt, ap);
    va_end(ap);
    if (k > 0) b->len += (size_t)k;
}

size_t clcnn_spec_format(const clcnn_layer_desc *layers, int n, char *buf, size_t size) {
    spec_buf b = {buf, buf ? size : 0, 0};
    if (b.size > 0) buf[0] = '\0';
    for (int i = 0; layers && i < n; i++) {
        const clcnn_layer_desc *d = &layers[i];
        const char *sep = i > 0 ? " " : "";
        switch (d->kind) {
        case CLCNN_LAYER_CONV2D:
            append(&b, "%sconv(%d,%d,stride=%d,pad=%d%s)", sep, d->out, d->kernel, d->stride,
                   d->pad, d->bias ? "" : ",bias=0");
            break;
        case CLCNN_LAYER_MAXPOOL2D:
            append(&b, "%smaxpool(%d,stride=%d", sep, d->kernel, d->stride);
            if (d->pad) append(&b, ",pad=%d", d->pad);
            append(&b, ")");
            break;
        case CLCNN_LAYER_RELU: append(&b, "%srelu", sep); break;
        case CLCNN_LAYER_FLATTEN: append(&b, "%sflatten", sep); break;
        case CLCNN_LAYER_LINEAR:
            append(&b, "%slinear(%d%s)", sep, d->out, d->bias ? "" : ",bias=0");
            break;
        default: append(&b, "%sunknown", sep); break; /* fails to parse back, visibly */
        }
    }
    return b.len;
}

const char *clcnn_layer_kind_name(clcnn_layer_kind k) {
    switch (k) {
    case CLCNN_LAYER_CONV2D: return "Conv2d";
    case CLCNN_LAYER_MAXPOOL2D: return "MaxPool2d";
    case CLCNN_LAYER_RELU: return "ReLU";
    case CLCNN_LAYER_FLATTEN: return "Flatten";
    case CLCNN_LAYER_LINEAR: return "Linear";
    }
    return "Unknown";
}
