/* Model spec parser (text -> flat layer list), the presets, and the canonical text of a layer
 * list. A hand-written recursive descent over bytes: it will be fuzzed, so every read is
 * checked against the length, numbers saturate instead of overflowing, and repetition is
 * expanded into a fixed-size array that is checked before every copy. What differs between
 * layer kinds (names, arguments, defaults, canonical text) is each kind's clcnn_layer_syntax. */
#include "spec.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
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
    /* A narrow ResNet-9 ("How to train your ResNet"): conv-BN-ReLU stages, two residual
     * blocks, max pools down to a global max, a linear head scaled by 0.125. 17.2M
     * multiply-adds per 1x28x28 image (2.1x seed), 24.0M per 3x32x32 (1.95x). The CLI's
     * recipe for it (schedule, augmentation, ...) is in src/cli/clcnn_train.c. */
    {"resnet", "conv(16,3,pad=1,bias=0) bn relu conv(32,3,pad=1,bias=0) bn relu maxpool(2) "
               "res(conv(32,3,pad=1,bias=0) bn relu conv(32,3,pad=1,bias=0) bn relu) "
               "conv(64,3,pad=1,bias=0) bn relu maxpool(2) conv(128,3,pad=1,bias=0) bn relu "
               "maxpool(2) res(conv(128,3,pad=1,bias=0) bn relu conv(128,3,pad=1,bias=0) bn "
               "relu) globalmaxpool flatten linear(10,bias=0) scale(0.125)"},
    /* torchvision's resnet18(num_classes=10), module for module: the 7x7/2 stem, a 3x3/2 max
     * pool, four stages of two BasicBlocks (1x1/2 projection shortcuts where a stage halves the
     * size), adaptive average pooling and fc, with torchvision's state_dict names. Its initial
     * weights are PyTorch's layer defaults, not torchvision's (Kaiming normal for the
     * convolutions): --init takes torchvision's. */
    {"resnet18", "conv1=conv(64,7,stride=2,pad=3,bias=0) bn1=bn relu maxpool(3,stride=2,pad=1) "
                 "layer1.0=res(conv1=conv(64,3,pad=1,bias=0) bn1=bn relu "
                 "conv2=conv(64,3,pad=1,bias=0) bn2=bn) relu "
                 "layer1.1=res(conv1=conv(64,3,pad=1,bias=0) bn1=bn relu "
                 "conv2=conv(64,3,pad=1,bias=0) bn2=bn) relu "
                 "layer2.0=res(conv1=conv(128,3,stride=2,pad=1,bias=0) bn1=bn relu "
                 "conv2=conv(128,3,pad=1,bias=0) bn2=bn | downsample.0=conv(128,1,stride=2,bias=0) "
                 "downsample.1=bn) relu layer2.1=res(conv1=conv(128,3,pad=1,bias=0) bn1=bn relu "
                 "conv2=conv(128,3,pad=1,bias=0) bn2=bn) relu "
                 "layer3.0=res(conv1=conv(256,3,stride=2,pad=1,bias=0) bn1=bn relu "
                 "conv2=conv(256,3,pad=1,bias=0) bn2=bn | downsample.0=conv(256,1,stride=2,bias=0) "
                 "downsample.1=bn) relu layer3.1=res(conv1=conv(256,3,pad=1,bias=0) bn1=bn relu "
                 "conv2=conv(256,3,pad=1,bias=0) bn2=bn) relu "
                 "layer4.0=res(conv1=conv(512,3,stride=2,pad=1,bias=0) bn1=bn relu "
                 "conv2=conv(512,3,pad=1,bias=0) bn2=bn | downsample.0=conv(512,1,stride=2,bias=0) "
                 "downsample.1=bn) relu layer4.1=res(conv1=conv(512,3,pad=1,bias=0) bn1=bn relu "
                 "conv2=conv(512,3,pad=1,bias=0) bn2=bn) relu globalavgpool flatten fc=linear(10)"},
};
#define N_PRESETS ((int)(sizeof presets / sizeof presets[0]))

/* Indexed by clcnn_layer_kind: one entry per line of src/layers/registry.h. */
static const clcnn_layer_syntax *const syntaxes[CLCNN_LAYER_COUNT] = {
#define SYNTAX_ENTRY(UPPER, lower, kernels) &clcnn_##lower##_syntax,
    CLCNN_LAYER_LIST(SYNTAX_ENTRY, CLCNN_LAYER_NO_KERNELS_)
#undef SYNTAX_ENTRY
};

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

/* Ends a word: a layer name, a keyword, a number, a module name or a label. '*' and '-' are
 * not delimiters, so "conv-2d" and "3*2" are reported whole. */
static int is_delim(char c) {
    return is_space(c) || c == ',' || c == '(' || c == ')' || c == '=' || c == ':' || c == '@' ||
           c == '|' || c == '\0';
}

/* A letter, a digit or '_': what labels and the parts of module names are made of. */
static int is_name_char(char c) {
    return is_digit(c) || c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* s[0..len) equals the lowercase NUL-terminated word, ignoring ASCII case. */
static int word_is(const char *s, size_t len, const char *word) {
    for (size_t i = 0; i < len; i++)
        if (word[i] == '\0' || lower(s[i]) != word[i]) return 0;
    return word[len] == '\0';
}

/* An snprintf that appends: counts what the full text needs and writes what fits. */
struct clcnn_spec_buf {
    char *buf;
    size_t size, len;
};

void clcnn_spec_append(clcnn_spec_buf *b, const char *fmt, ...) {
    size_t room = b->len < b->size ? b->size - b->len : 0;
    va_list ap;
    int k;
    va_start(ap, fmt);
    k = vsnprintf(room ? b->buf + b->len : NULL, room, fmt, ap);
    va_end(ap);
    if (k > 0) b->len += (size_t)k;
}

/* ---------------------------------------------------------------------------------------- */
/* Parser state and messages                                                                  */

#define NO_GROUP ((size_t)-1)
#define QUOTE_MAX 160 /* longest piece of spec quoted in a message */
#define TOKEN_MAX 24  /* longest token quoted in a message */

/* A value label and the value it names. */
typedef struct spec_label {
    char name[CLCNN_SPEC_LABEL_MAX];
    int v;
} spec_label;

struct clcnn_spec_parser {
    const char *s;         /* the text: the spec, or a preset's text */
    size_t len;            /* strlen(s), at most CLCNN_SPEC_MAX_LEN */
    size_t i;              /* cursor */
    clcnn_layer_desc *out; /* CLCNN_SPEC_MAX_LAYERS entries */
    int n;                 /* layers in out so far, repetitions expanded */
    int depth;             /* repetition groups currently open */
    int cur;               /* the current value: what the next layer reads (-1: the input) */
    size_t repeat_at;      /* where the outermost open repetition starts (NO_GROUP: none) */
    /* The labels defined so far, in order; a later definition of a name hides the earlier. */
    spec_label *labels;
    int n_labels;
    clcnn_error *e;
};
typedef clcnn_spec_parser parser;

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
clcnn_status clcnn_spec_fail(const parser *p, size_t at, const char *fmt, ...) {
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
        return clcnn_spec_fail(p, at, "%s expects %s, got %s", what, expects, describe(p, at, tok));
    for (size_t k = 0; k < len; k++) {
        char c = p->s[at + k];
        if (!is_digit(c))
            return clcnn_spec_fail(p, at, "%s expects %s, got %s", what, expects,
                                   quote_token(tok, p->s + at, len));
        if (v < 100000000) v = v * 10 + (c - '0');
    }
    if (is_flag && v > 1)
        return clcnn_spec_fail(p, at, "%s expects %s, got %s", what, expects,
                               quote_token(tok, p->s + at, len));
    if (v > max)
        return clcnn_spec_fail(p, at, "%s %s is too large (at most %d)", what,
                               quote_token(tok, p->s + at, len), max);
    if (v < min) return clcnn_spec_fail(p, at, "%s must be in %d..%d, got %d", what, min, max, v);
    *out = v;
    return CLCNN_SUCCESS;
}

/* The range rule of a real-number argument; NULL when v satisfies it, else what it must be,
 * into buf. */
static const char *check_real(const clcnn_arg_def *ad, double v, char *buf, size_t size) {
    int lo = ad->min > -DBL_MAX, hi = ad->max < DBL_MAX;
    if (!isfinite(v)) return "a finite number";
    if ((ad->flags & CLCNN_ARGF_ABOVE_MIN) && !(v > ad->min))
        snprintf(buf, size, "greater than %g", ad->min);
    else if (v >= ad->min && v <= ad->max)
        return NULL;
    else if (lo && hi)
        snprintf(buf, size, "in [%g, %g]", ad->min, ad->max);
    else if (lo)
        snprintf(buf, size, "at least %g", ad->min);
    else
        snprintf(buf, size, "at most %g", ad->max);
    return buf;
}

/* The float rule every real-number argument shares: the layers hand their arguments to the kernels
 * as floats, so a value must survive the conversion: it must not round to infinity (a
 * magnitude of FLT_MAX + 2^103, half a unit past FLT_MAX, or more) and a non-zero value must
 * not round below FLT_MIN, the smallest normal float (to 0 or a subnormal, which some devices
 * flush to 0: bn(eps=1e-300) would divide by zero). NULL when v passes, else what v is. */
static const char *check_float(double v, char *buf, size_t size) {
    if (fabs(v) >= (double)FLT_MAX + 0x1p103)
        snprintf(buf, size, "too large for float (the largest magnitude is %.9g)", FLT_MAX);
    else if (v != 0.0 && fabsf((float)v) < FLT_MIN)
        snprintf(buf, size,
                 "too small for float (a non-zero magnitude must be at least %.9g, the smallest "
                 "normal float)",
                 FLT_MIN);
    else
        return NULL;
    return buf;
}

/* Reads the decimal number s[at..at+len) ("0.1", "1e-5", "-2", ".5", however many digits) into
 * *out and checks it against the argument's rule and the float rule; layer names the layer in the
 * float rule's message. strtod reads the text in place: the token is only digits, signs, '.',
 * 'e' and 'E', so strtod's other spellings (hexadecimal, "inf", "nan") are refused, and it is
 * followed by a delimiter or the text's terminating NUL, which cannot continue a number, so
 * strtod stops within the token whatever its length. */
static clcnn_status read_real(const parser *p, const char *layer, const clcnn_arg_def *ad,
                              size_t at, size_t len, double *out) {
    char tok[TOKEN_MAX + 8], why[160], *end = NULL;
    const char *name = ad->name, *rule, *s = p->s + at;
    int ok = len > 0;
    for (size_t k = 0; ok && k < len; k++) {
        char c = s[k];
        ok = is_digit(c) || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E';
    }
    double v = 0.0;
    if (ok) {
        v = strtod(s, &end);
        ok = end == s + len;
    }
    if (!ok)
        return clcnn_spec_fail(p, at, "%s expects a number, got %s", name,
                               len ? quote_token(tok, s, len) : describe(p, at, tok));
    if ((rule = check_real(ad, v, why, sizeof why)))
        return clcnn_spec_fail(p, at, "%s must be %s, got %s", name, rule,
                               quote_token(tok, s, len));
    if ((rule = check_float(v, why, sizeof why)))
        return clcnn_spec_fail(p, at, "%s %s %s is %s", layer, name, quote_token(tok, s, len),
                               rule);
    *out = v;
    return CLCNN_SUCCESS;
}

void clcnn_spec_append_real(clcnn_spec_buf *b, double v) {
    char buf[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    clcnn_spec_append(b, "%s", buf);
}

/* ---------------------------------------------------------------------------------------- */
/* Layers                                                                                     */

#define LIST_MAX 256 /* longest list of names in a message */

/* Appends word to the ", "-separated list in b. */
static void list_add(clcnn_spec_buf *b, const char *word) {
    clcnn_spec_append(b, "%s%s", b->len > 0 ? ", " : "", word);
}

/* The index in ls->args of positional argument k (0-based); -1 when there is none. */
static int positional(const clcnn_layer_syntax *ls, int k) {
    for (int a = 0; a < ls->n_args; a++)
        if ((ls->args[a].flags & CLCNN_ARGF_POS) && k-- == 0) return a;
    return -1;
}

/* How many positional arguments ls takes (flag CLCNN_ARGF_POS), or must be given
 * (CLCNN_ARGF_REQ); whether it takes any by keyword (CLCNN_ARGF_KW). */
static int count_args(const clcnn_layer_syntax *ls, unsigned flag) {
    int n = 0;
    for (int a = 0; a < ls->n_args; a++)
        n += (ls->args[a].flags & flag) != 0;
    return n;
}

/* The names of the first n positional arguments of ls, "out, kernel", into buf (LIST_MAX). */
static const char *positional_names(char *buf, const clcnn_layer_syntax *ls, int n) {
    clcnn_spec_buf b = {buf, LIST_MAX, 0};
    buf[0] = '\0';
    for (int k = 0; k < n; k++)
        list_add(&b, ls->args[positional(ls, k)].name);
    return buf;
}

/* The keywords ls takes, aliases included, "stride, pad, padding", into buf (LIST_MAX). */
static const char *keyword_names(char *buf, const clcnn_layer_syntax *ls) {
    clcnn_spec_buf b = {buf, LIST_MAX, 0};
    buf[0] = '\0';
    for (int a = 0; a < ls->n_args; a++) {
        if (!(ls->args[a].flags & CLCNN_ARGF_KW)) continue;
        list_add(&b, ls->args[a].name);
        if (ls->args[a].alias) list_add(&b, ls->args[a].alias);
    }
    return buf;
}

/* The index in ls->args of the keyword s[0..len), ignoring ASCII case; -1 for none. */
static int find_keyword(const clcnn_layer_syntax *ls, const char *s, size_t len) {
    for (int a = 0; a < ls->n_args; a++) {
        const clcnn_arg_def *ad = &ls->args[a];
        if ((ad->flags & CLCNN_ARGF_KW) &&
            (word_is(s, len, ad->name) || (ad->alias && word_is(s, len, ad->alias))))
            return a;
    }
    return -1;
}

/* One argument, the cursor on its first byte: "VALUE" or "KEY = VALUE", into d->arg. */
static clcnn_status parse_arg(parser *p, const clcnn_layer_syntax *ls, clcnn_layer_args *a,
                              clcnn_layer_desc *d, int *seen_kw) {
    char tok[TOKEN_MAX + 8], list[LIST_MAX];
    size_t at = p->i, end = word_end(p, at);
    int k, npos = count_args(ls, CLCNN_ARGF_POS);
    p->i = end;
    skip_ws(p);
    if (cur(p) == '=') {
        if (end == at) return clcnn_spec_fail(p, p->i, "expected a keyword name before '='");
        if (!count_args(ls, CLCNN_ARGF_KW))
            return clcnn_spec_fail(p, at, "%s takes no keyword arguments, got %s", ls->name,
                                   quote_token(tok, p->s + at, end - at));
        if ((k = find_keyword(ls, p->s + at, end - at)) < 0)
            return clcnn_spec_fail(p, at, "%s has no keyword %s (it takes %s)", ls->name,
                                   quote_token(tok, p->s + at, end - at), keyword_names(list, ls));
        if (a->how[k] == CLCNN_ARG_KW)
            return clcnn_spec_fail(p, at, "%s given twice", ls->args[k].name);
        if (a->how[k] == CLCNN_ARG_POS)
            return clcnn_spec_fail(p, at, "%s given both positionally and by keyword",
                                   ls->args[k].name);
        p->i++;
        skip_ws(p);
        at = p->i;
        end = word_end(p, at);
        p->i = end;
        *seen_kw = 1;
        a->how[k] = CLCNN_ARG_KW;
    } else {
        if (end == at)
            return clcnn_spec_fail(p, at, "expected an argument, got %s", describe(p, at, tok));
        if (*seen_kw) return clcnn_spec_fail(p, at, "positional argument after keyword arguments");
        if (npos == 0)
            return clcnn_spec_fail(p, at,
                                   "%s takes no positional arguments (it takes %s by keyword)",
                                   ls->name, keyword_names(list, ls));
        if (a->npos >= npos)
            return clcnn_spec_fail(p, at, "%s takes at most %d positional argument%s (%s)",
                                   ls->name, npos, npos == 1 ? "" : "s",
                                   positional_names(list, ls, npos));
        k = positional(ls, a->npos++);
        a->how[k] = CLCNN_ARG_POS;
    }
    const clcnn_arg_def *ad = &ls->args[k];
    a->col[k] = at;
    if (ad->real) return read_real(p, ls->name, ad, at, end - at, &d->arg[k].r);
    return read_int(p, ad->name, (int)ad->min, (int)ad->max, at, end - at, &d->arg[k].i);
}

/* "( [arg {, arg}] )", the cursor on '('. */
static clcnn_status parse_args(parser *p, const clcnn_layer_syntax *ls, clcnn_layer_args *a,
                               clcnn_layer_desc *d) {
    char tok[TOKEN_MAX + 8];
    size_t open = p->i++;
    int seen_kw = 0;
    clcnn_status st;
    skip_ws(p);
    if (cur(p) == ')') {
        p->i++;
        return CLCNN_SUCCESS;
    }
    if (ls->n_args == 0) return clcnn_spec_fail(p, p->i, "%s takes no arguments", ls->name);
    for (;;) {
        skip_ws(p);
        st = parse_arg(p, ls, a, d, &seen_kw);
        if (st != CLCNN_SUCCESS) return st;
        skip_ws(p);
        if (p->i >= p->len)
            return clcnn_spec_fail(p, p->i,
                                   "missing ')' to close the arguments of %s opened at column %zu",
                                   ls->name, open + 1);
        if (cur(p) == ')') {
            p->i++;
            return CLCNN_SUCCESS;
        }
        if (cur(p) != ',')
            return clcnn_spec_fail(p, p->i, "expected ',' or ')' in the arguments of %s, got %s",
                                   ls->name, describe(p, p->i, tok));
        p->i++;
    }
}

static clcnn_status unknown_layer(const parser *p, size_t at, size_t end) {
    char tok[TOKEN_MAX + 8], names[LIST_MAX];
    clcnn_spec_buf b = {names, sizeof names, 0};
    quote_token(tok, p->s + at, end - at);
    for (int k = 0; k < N_PRESETS; k++)
        if (word_is(p->s + at, end - at, presets[k].name))
            return clcnn_spec_fail(p, at, "unknown layer %s (a preset name must be the whole spec)",
                                   tok);
    names[0] = '\0';
    for (int k = 0; k < CLCNN_LAYER_COUNT; k++) {
        const char *sep = k == 0 ? "" : k < CLCNN_LAYER_COUNT - 1 ? ", " : " or ";
        clcnn_spec_append(&b, "%s%s", sep, syntaxes[k]->name);
    }
    return clcnn_spec_fail(p, at, "unknown layer %s (expected %s)", tok, names);
}

/* The kind whose name or an alias is s[0..len), ignoring ASCII case; -1 for none. Where two
 * kinds answer to one word ("mul": scale's alias, and the product of values), join says which
 * is wanted: the one that reads values (1) or the other (0). */
static int find_kind(const char *s, size_t len, int join) {
    int found = -1;
    for (int k = 0; k < CLCNN_LAYER_COUNT; k++) {
        const clcnn_layer_syntax *ls = syntaxes[k];
        int match = word_is(s, len, ls->name);
        for (int a = 0; !match && a < CLCNN_LAYER_MAX_ALIASES && ls->aliases[a]; a++)
            match = word_is(s, len, ls->aliases[a]);
        if (match && (found < 0 || (ls->max_in > 0) == join)) found = k;
    }
    return found;
}

/* Whether "( @" follows offset at: the arguments are values. */
static int values_follow(const parser *p, size_t at) {
    while (at < p->len && is_space(p->s[at]))
        at++;
    if (at >= p->len || p->s[at] != '(') return 0;
    for (at++; at < p->len && is_space(p->s[at]); at++)
        ;
    return at < p->len && p->s[at] == '@';
}

/* What ends a list: the end of the text, the ')' of its group, or the '|' before a residual
 * block's shortcut. */
typedef enum list_end { END_TEXT, END_PAREN, END_BAR } list_end;

static clcnn_status parse_list(parser *p, size_t open, const char *empty, int bar, list_end *how);

/* Appends d, checking the layer limit; `start` is where its text begins. */
static clcnn_status append(parser *p, const clcnn_layer_desc *d, size_t start) {
    if (p->n >= CLCNN_SPEC_MAX_LAYERS && p->repeat_at != NO_GROUP)
        return clcnn_spec_fail(p, p->repeat_at, "more than %d layers after expanding repetitions",
                               CLCNN_SPEC_MAX_LAYERS);
    if (p->n >= CLCNN_SPEC_MAX_LAYERS)
        return clcnn_spec_fail(p, start, "more than %d layers", CLCNN_SPEC_MAX_LAYERS);
    p->out[p->n++] = *d;
    return CLCNN_SUCCESS;
}

/* The value labelled s[0..len) (the latest definition), -2 when there is none. "input" is the
 * model's input. */
static int find_label(const parser *p, const char *s, size_t len) {
    for (int k = p->n_labels - 1; k >= 0; k--)
        if (strlen(p->labels[k].name) == len && !memcmp(p->labels[k].name, s, len))
            return p->labels[k].v;
    return len == 5 && !memcmp(s, "input", 5) ? -1 : -2;
}

/* A label at s[at..end): letters, digits and '_', not starting with a digit. */
static clcnn_status check_label(const parser *p, size_t at, size_t end) {
    char tok[TOKEN_MAX + 8];
    int ok = end > at && !is_digit(p->s[at]);
    for (size_t k = at; ok && k < end; k++)
        ok = is_name_char(p->s[k]);
    if (!ok)
        return clcnn_spec_fail(p, at,
                               "a label is letters, digits and '_' and starts with a letter or "
                               "'_', got %s",
                               end > at ? quote_token(tok, p->s + at, end - at)
                                        : describe(p, at, tok));
    if (end - at >= CLCNN_SPEC_LABEL_MAX)
        return clcnn_spec_fail(p, at, "label %s is longer than %d bytes",
                               quote_token(tok, p->s + at, end - at), CLCNN_SPEC_LABEL_MAX - 1);
    return CLCNN_SUCCESS;
}

/* "x:", the cursor on ':' after the label at s[at..): checked, its offset into *label_at. It
 * names the value of the item after it (bind_label). */
static clcnn_status parse_label_def(parser *p, size_t at, size_t *label_at) {
    size_t end = p->i;
    clcnn_status st = check_label(p, at, end);
    if (st) return st;
    if (end - at == 5 && !memcmp(p->s + at, "input", 5))
        return clcnn_spec_fail(p, at, "'input' is the model's input and cannot be redefined");
    *label_at = at;
    p->i++;
    return CLCNN_SUCCESS;
}

/* The label at s[at..] (up to its ':') names the current value from here on. */
static clcnn_status bind_label(parser *p, size_t at) {
    size_t end = at;
    while (p->s[end] != ':')
        end++;
    if (p->n_labels >= CLCNN_SPEC_MAX_LABELS)
        return clcnn_spec_fail(p, at, "more than %d labels", CLCNN_SPEC_MAX_LABELS);
    spec_label *l = &p->labels[p->n_labels++];
    memcpy(l->name, p->s + at, end - at);
    l->name[end - at] = '\0';
    l->v = p->cur;
    if (p->cur >= 0 && !p->out[p->cur].label[0]) strcpy(p->out[p->cur].label, l->name);
    return CLCNN_SUCCESS;
}

/* "@x", the cursor on '@': the value labelled x, into *v. */
static clcnn_status parse_ref(parser *p, int *v) {
    char tok[TOKEN_MAX + 8];
    size_t at = ++p->i, end = word_end(p, at);
    clcnn_status st = check_label(p, at, end);
    if (st) return st;
    p->i = end;
    if ((*v = find_label(p, p->s + at, end - at)) == -2)
        return clcnn_spec_fail(p, at,
                               "no value is labelled %s here (x: LAYER labels that "
                               "layer's output, before @x reads it)",
                               quote_token(tok, p->s + at, end - at));
    return CLCNN_SUCCESS;
}

/* "name=", the cursor on '=' after the name at s[at..): a module name, parts of letters,
 * digits and '_' joined by '.', into d. */
static clcnn_status parse_name(parser *p, size_t at, clcnn_layer_desc *d) {
    char tok[TOKEN_MAX + 8];
    size_t end = p->i;
    int ok = end > at && p->s[at] != '.' && p->s[end - 1] != '.';
    for (size_t k = at; ok && k < end; k++)
        ok = is_name_char(p->s[k]) || (p->s[k] == '.' && p->s[k + 1] != '.');
    if (!ok)
        return clcnn_spec_fail(p, at,
                               "a module name is parts of letters, digits and '_' joined by '.', "
                               "got %s",
                               quote_token(tok, p->s + at, end - at));
    if (end - at >= CLCNN_SPEC_NAME_MAX)
        return clcnn_spec_fail(p, at, "module name %s is longer than %d bytes",
                               quote_token(tok, p->s + at, end - at), CLCNN_SPEC_NAME_MAX - 1);
    memcpy(d->name, p->s + at, end - at);
    d->name[end - at] = '\0';
    p->i++;
    return CLCNN_SUCCESS;
}

/* The values of a joining layer ("add(@a, @b)"), the cursor on '(': each is an input, and the
 * current value comes first when none of them is it. */
static clcnn_status parse_refs(parser *p, const clcnn_layer_syntax *ls, size_t start,
                               clcnn_layer_desc *d) {
    char tok[TOKEN_MAX + 8];
    int v[CLCNN_MAX_INPUTS], n = 0, has_cur = 0;
    size_t open = p->i++;
    clcnn_status st;
    for (;;) {
        skip_ws(p);
        if (cur(p) != '@')
            return clcnn_spec_fail(p, p->i, "%s expects values such as @x, got %s", ls->name,
                                   describe(p, p->i, tok));
        if (n >= CLCNN_MAX_INPUTS - 1)
            return clcnn_spec_fail(p, p->i, "%s reads at most %d values", ls->name,
                                   CLCNN_MAX_INPUTS);
        if ((st = parse_ref(p, &v[n]))) return st;
        has_cur |= v[n++] == p->cur;
        skip_ws(p);
        if (p->i >= p->len)
            return clcnn_spec_fail(p, p->i,
                                   "missing ')' to close the values of %s opened at column %zu",
                                   ls->name, open + 1);
        if (cur(p) == ')') break;
        if (cur(p) != ',')
            return clcnn_spec_fail(p, p->i, "expected ',' or ')' in the values of %s, got %s",
                                   ls->name, describe(p, p->i, tok));
        p->i++;
    }
    p->i++;
    d->n_in = 0;
    if (!has_cur) d->in[d->n_in++] = p->cur;
    for (int k = 0; k < n; k++)
        d->in[d->n_in++] = v[k];
    if (d->n_in < ls->min_in || d->n_in > ls->max_in)
        return clcnn_spec_fail(p, start, "%s reads %s%d values, got %d", ls->name,
                               ls->min_in == ls->max_in ? "" : "at least ", ls->min_in, d->n_in);
    return CLCNN_SUCCESS;
}

/* The body of a group layer ("res( layers )" or "res( layers | shortcut )"), the cursor after
 * its name: its entry goes at index `at` of the output, before the body's. */
static clcnn_status parse_group(parser *p, const clcnn_layer_syntax *ls, size_t start, int at) {
    char tok[TOKEN_MAX + 8], what[48];
    clcnn_status st;
    list_end how;
    skip_ws(p);
    if (cur(p) != '(')
        return clcnn_spec_fail(p, p->i,
                               "expected '(' after %s (a residual block is %s( layers )), "
                               "got %s",
                               ls->name, ls->name, describe(p, p->i, tok));
    if (p->depth >= CLCNN_SPEC_MAX_DEPTH)
        return clcnn_spec_fail(p, start, "groups nest deeper than %d", CLCNN_SPEC_MAX_DEPTH);
    size_t open = p->i++;
    int in = p->cur;
    snprintf(what, sizeof what, "empty %s block", ls->name);
    p->depth++;
    st = parse_list(p, open, what, 1, &how);
    clcnn_layer_desc *d = &p->out[at];
    d->n_in = 2, d->in[0] = in, d->in[1] = p->cur;
    d->body = p->n - at - 1;
    if (!st && how == END_BAR) {
        p->cur = in;
        snprintf(what, sizeof what, "empty shortcut of the %s block", ls->name);
        st = parse_list(p, open, what, 0, &how);
        d = &p->out[at];
        d->n_in = 3, d->in[2] = p->cur;
        d->shortcut = p->n - at - 1 - d->body;
    }
    p->depth--;
    p->cur = at;
    return st;
}

/* "NAME [( args )]", "NAME( layers )" for a group or "NAME(@x, ...)" for a joining layer, the
 * cursor on the name; d holds the module name given before it, if any. */
static clcnn_status parse_layer(parser *p, clcnn_layer_desc *d) {
    char list[LIST_MAX];
    size_t start = p->i, end = word_end(p, start);
    int kind = find_kind(p->s + start, end - start, values_follow(p, end));
    const clcnn_layer_syntax *ls;
    clcnn_layer_args a;
    clcnn_status st;
    if (kind < 0) return unknown_layer(p, start, end);
    ls = syntaxes[kind];
    memset(&a, 0, sizeof a);
    p->i = end;
    d->kind = (clcnn_layer_kind)kind;
    d->pos = (int)start + 1;
    d->n_in = 1, d->in[0] = p->cur;
    for (int k = 0; k < ls->n_args; k++) {
        if (ls->args[k].real)
            d->arg[k].r = ls->args[k].def;
        else
            d->arg[k].i = (int)ls->args[k].def;
    }
    if (ls->group) {
        if ((st = append(p, d, start))) return st;
        return parse_group(p, ls, start, p->n - 1);
    }
    skip_ws(p);
    if (ls->max_in) {
        if (cur(p) != '(')
            return clcnn_spec_fail(p, start, "%s needs the values it reads, as in %s(@x)", ls->name,
                                   ls->name);
        if ((st = parse_refs(p, ls, start, d))) return st;
    } else if (cur(p) == '(') {
        st = parse_args(p, ls, &a, d);
        if (st != CLCNN_SUCCESS) return st;
    } else {
        p->i = end; /* the whitespace separates this layer from the next: leave it */
    }
    int nreq = count_args(ls, CLCNN_ARGF_REQ), npos = count_args(ls, CLCNN_ARGF_POS);
    if (a.npos < nreq)
        return clcnn_spec_fail(p, start, "%s needs %s%d positional argument%s (%s), got %d",
                               ls->name, npos > nreq ? "at least " : "", nreq, nreq == 1 ? "" : "s",
                               positional_names(list, ls, nreq), a.npos);
    if (ls->finish) {
        st = ls->finish(p, &a, d);
        if (st != CLCNN_SUCCESS) return st;
    }
    if ((st = append(p, d, start))) return st;
    p->cur = p->n - 1;
    return CLCNN_SUCCESS;
}

/* "N*( list )", the cursor on the first digit. The group is parsed N times, as if written out
 * N times (each copy reads what the one before made, and its labels hide the earlier copy's);
 * every copy adds a layer, so the work stays bounded by CLCNN_SPEC_MAX_LAYERS however the
 * groups nest. */
static clcnn_status parse_repeat(parser *p) {
    char tok[TOKEN_MAX + 8];
    size_t start = p->i, open;
    int count = 0;
    clcnn_status st = CLCNN_SUCCESS;
    list_end how;
    while (p->i < p->len && is_digit(p->s[p->i]))
        p->i++;
    size_t digits = p->i - start;
    skip_ws(p);
    if (cur(p) != '*')
        return clcnn_spec_fail(
            p, p->i,
            "expected '*' after the repeat count (a repetition is N*( layers )), "
            "got %s",
            describe(p, p->i, tok));
    p->i++;
    skip_ws(p);
    if (cur(p) != '(')
        return clcnn_spec_fail(p, p->i,
                               "expected '(' after '*' (a repetition is N*( layers )), got %s",
                               describe(p, p->i, tok));
    st = read_int(p, "repeat count", 1, CLCNN_SPEC_MAX_REPEAT, start, digits, &count);
    if (st != CLCNN_SUCCESS) return st;
    if (p->depth >= CLCNN_SPEC_MAX_DEPTH)
        return clcnn_spec_fail(p, p->i, "groups nest deeper than %d", CLCNN_SPEC_MAX_DEPTH);
    open = p->i;
    p->depth++;
    int outer = p->repeat_at == NO_GROUP;
    if (outer) p->repeat_at = start;
    for (int r = 0; r < count; r++) {
        p->i = open + 1;
        /* an error, or a group without layers, ends the loop: parse_list refuses that */
        if ((st = parse_list(p, open, "empty repetition group", 0, &how))) break;
    }
    p->depth--;
    if (outer) p->repeat_at = NO_GROUP;
    return st;
}

/* What an item of a list is: a layer, a block or a repetition (each makes a value), "@x", or
 * "x:". */
typedef enum item_kind { ITEM_VALUE, ITEM_REF, ITEM_LABEL } item_kind;

/* One item of a list, the cursor on its first byte: "[name=] layer", "N*( list )", "x:" (its
 * offset into *label_at) or "@x". */
static clcnn_status parse_item(parser *p, item_kind *kind, size_t *label_at) {
    char tok[TOKEN_MAX + 8];
    size_t at = p->i, end = word_end(p, at);
    clcnn_layer_desc d;
    clcnn_status st;
    *kind = ITEM_VALUE;
    memset(&d, 0, sizeof d);
    if (cur(p) == '@') return *kind = ITEM_REF, parse_ref(p, &p->cur);
    if (end > at && end < p->len && p->s[end] == ':')
        return *kind = ITEM_LABEL, p->i = end, parse_label_def(p, at, label_at);
    if (end > at && end < p->len && p->s[end] == '=') {
        p->i = end;
        if ((st = parse_name(p, at, &d))) return st;
        if (is_digit(cur(p)) || cur(p) == '@' || is_delim(cur(p)))
            return clcnn_spec_fail(p, p->i, "expected a layer after the module name, got %s",
                                   describe(p, p->i, tok));
        return parse_layer(p, &d);
    }
    if (is_digit(cur(p))) return parse_repeat(p);
    if (!is_delim(cur(p))) return parse_layer(p, &d);
    return clcnn_spec_fail(p, p->i, "expected a layer name, got %s", describe(p, p->i, tok));
}

/* Where a list stands: what came last, and where (for the messages). */
typedef struct list_state {
    int items, sep, comma, ref, label, first; /* first: the list's first entry */
    size_t comma_at, ref_at, label_at;
} list_state;

/* The list ends at the cursor (the end of the text, ')' or '|'): checks that it may end there,
 * and says how it ended in *how. */
static clcnn_status end_list(parser *p, size_t open, const char *empty, int bar,
                             const list_state *l, list_end *how) {
    char c = cur(p);
    int end = p->i >= p->len;
    if (l->comma) return clcnn_spec_fail(p, l->comma_at, "expected a layer after ','");
    if (c == '|' && !bar)
        return clcnn_spec_fail(p, p->i,
                               open == NO_GROUP ? "unexpected '|' outside a res block"
                                                : "unexpected '|' (a res block has one, before "
                                                  "its shortcut)");
    if (end && open != NO_GROUP)
        return clcnn_spec_fail(p, p->i, "missing ')' to close the group opened at column %zu",
                               open + 1);
    if (!end && c == ')' && open == NO_GROUP)
        return clcnn_spec_fail(p, p->i, "unexpected ')' with no group open");
    if (p->n == l->first)
        return open == NO_GROUP ? clcnn_spec_fail(p, 0, "empty spec, expected at least one layer")
                                : clcnn_spec_fail(p, open, "%s", empty);
    if (l->label)
        return clcnn_spec_fail(p, l->label_at, "a label names the layer after it: none follows");
    if (l->ref) return clcnn_spec_fail(p, l->ref_at, "a layer must follow a value reference (@x)");
    *how = end ? END_TEXT : c == '|' ? END_BAR : END_PAREN;
    if (!end) p->i++;
    return CLCNN_SUCCESS;
}

/* Items separated by whitespace and/or one comma, up to the end of the text (open ==
 * NO_GROUP), or up to the ')' that closes the group whose '(' is at offset open or, where bar
 * is 1, the '|' before a residual block's shortcut (*how says which); `empty` is the message
 * for a group with no layer in it. */
static clcnn_status parse_list(parser *p, size_t open, const char *empty, int bar, list_end *how) {
    char tok[TOKEN_MAX + 8];
    list_state l = {.first = p->n};
    clcnn_status st;
    skip_ws(p);
    for (;;) {
        if (p->i >= p->len || cur(p) == ')' || cur(p) == '|')
            return end_list(p, open, empty, bar, &l, how);
        if (l.items > 0 && !l.sep)
            return clcnn_spec_fail(p, p->i, "expected ',' or whitespace between layers, got %s",
                                   describe(p, p->i, tok));
        size_t at = p->i, def_at = 0;
        item_kind kind;
        if ((st = parse_item(p, &kind, &def_at))) return st;
        if (kind == ITEM_LABEL && l.label) {
            size_t len = 0;
            while (p->s[l.label_at + len] != ':')
                len++;
            return clcnn_spec_fail(p, at, "one label a layer: %s names the next one already",
                                   quote_token(tok, p->s + l.label_at, len));
        }
        if (kind == ITEM_REF && l.label)
            return clcnn_spec_fail(p, l.label_at,
                                   "a label names the layer after it, not a "
                                   "reference: write @x first");
        if (kind == ITEM_LABEL) l.label = 1, l.label_at = def_at;
        if (kind == ITEM_REF) l.ref = 1, l.ref_at = at;
        if (kind == ITEM_VALUE) {
            l.ref = 0;
            if (l.label && (st = bind_label(p, l.label_at))) return st;
            l.label = 0;
        }
        l.items++;
        l.sep = skip_ws(p) > 0 || kind == ITEM_LABEL; /* "x:conv" needs no space */
        l.comma = cur(p) == ',';
        if (l.comma) {
            l.comma_at = p->i++;
            l.sep = 1;
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
    spec_label labels[CLCNN_SPEC_MAX_LABELS];
    parser p;
    list_end how;
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
    p.cur = -1;
    p.repeat_at = NO_GROUP;
    p.labels = labels;
    p.e = e;
    st = parse_list(&p, NO_GROUP, "", 0, &how);
    if (st != CLCNN_SUCCESS) return st;
    *layers = malloc((size_t)p.n * sizeof **layers);
    if (!*layers) return clcnn_fail(e, CLCNN_ERR_OUT_OF_HOST_MEMORY, "model spec: out of memory");
    memcpy(*layers, buf, (size_t)p.n * sizeof **layers);
    *n = p.n;
    return CLCNN_SUCCESS;
}

typedef struct format_walk {
    const clcnn_layer_desc *l;
    int n;
    clcnn_spec_buf *b;
    int cur; /* the current value when the text so far is parsed */
    /* Per entry: whether the text refers to its value by a label it was not given (need[v]
     * set by a first walk, which writes nothing); NULL: not known. */
    unsigned char *need;
} format_walk;

/* Whether entry k (not v) has the label `name`. */
static int label_taken(const format_walk *f, int v, const char *name) {
    for (int k = 0; k < f->n; k++)
        if (k != v && !strcmp(f->l[k].label, name)) return 1;
    return 0;
}

/* The label of value v in the canonical text: its own, made unique (name_v, then more '_')
 * when another entry has the same one, as after a repetition; v<index> for a value the spec
 * did not label; "input" for the model's input. */
static const char *label_text(format_walk *f, int v, char *buf, size_t size) {
    if (v < 0 || v >= f->n) return v == -1 ? "input" : "?";
    const char *own = f->l[v].label;
    if (own[0] && !label_taken(f, v, own)) return own;
    if (own[0])
        snprintf(buf, size, "%s_%d", own, v);
    else
        snprintf(buf, size, "v%d", v);
    while (label_taken(f, v, buf) && strlen(buf) + 1 < size)
        strcat(buf, "_");
    return buf;
}

static void format_ref(format_walk *f, int v) {
    char buf[CLCNN_SPEC_LABEL_MAX + 16];
    if (v >= 0 && v < f->n && !f->l[v].label[0] && f->need) f->need[v] = 1;
    clcnn_spec_append(f->b, "@%s", label_text(f, v, buf, sizeof buf));
}

/* "@x " when the entry's first input is not the current value. */
static void format_from(format_walk *f, int v) {
    if (v == f->cur) return;
    format_ref(f, v);
    clcnn_spec_append(f->b, " ");
    f->cur = v;
}

static void format_list(format_walk *f, int from, int count);

static void append_arg(const clcnn_layer_desc *d, const clcnn_layer_syntax *ls, int k,
                       clcnn_spec_buf *b);

/* "NAME" or "NAME(args)" by the rule of clcnn_arg_def: required and SHOW_POS arguments
 * positionally, SHOW_KW ones and those that differ from their defaults by keyword. */
static void format_args(const clcnn_layer_desc *d, const clcnn_layer_syntax *ls,
                        clcnn_spec_buf *b) {
    int n = 0;
    clcnn_spec_append(b, "%s", ls->name);
    for (int k = 0; k < ls->n_args; k++) {
        const clcnn_arg_def *ad = &ls->args[k];
        int pos = (ad->flags & (CLCNN_ARGF_REQ | CLCNN_ARGF_SHOW_POS)) != 0;
        int differs = ad->real ? d->arg[k].r != ad->def : d->arg[k].i != (int)ad->def;
        if (!pos && !(ad->flags & CLCNN_ARGF_SHOW_KW) && !differs) continue;
        clcnn_spec_append(b, "%s", n++ ? "," : "(");
        if (!pos) clcnn_spec_append(b, "%s=", ad->name);
        append_arg(d, ls, k, b);
    }
    if (n) clcnn_spec_append(b, ")");
}

/* The canonical text of entry i, and how many entries it covers (a group's body with it). */
static int format_entry(format_walk *f, int i) {
    const clcnn_layer_desc *d = &f->l[i];
    const clcnn_layer_syntax *ls = clcnn_layer_syntax_of(d->kind);
    int covers = 1;
    if (!ls) {
        clcnn_spec_append(f->b, "unknown"); /* fails to parse back, visibly */
        return 1;
    }
    if (ls->max_in) {
        int has_cur = 0;
        for (int k = 0; k < d->n_in; k++)
            has_cur |= d->in[k] == f->cur;
        if (!has_cur && d->n_in > 0) format_from(f, d->in[0]);
    } else if (d->n_in > 0) {
        format_from(f, d->in[0]);
    }
    if (d->label[0] || (f->need && f->need[i])) {
        char buf[CLCNN_SPEC_LABEL_MAX + 16];
        clcnn_spec_append(f->b, "%s: ", label_text(f, i, buf, sizeof buf));
    }
    if (d->name[0]) clcnn_spec_append(f->b, "%s=", d->name);
    if (ls->group) {
        int rest = f->n - i - 1, body = d->body < rest ? d->body : rest;
        int sc = d->shortcut < rest - body ? d->shortcut : rest - body;
        clcnn_spec_append(f->b, "%s(", ls->name);
        format_list(f, i + 1, body > 0 ? body : 0);
        if (sc > 0) {
            clcnn_spec_append(f->b, " | ");
            f->cur = d->in[0];
            format_list(f, i + 1 + body, sc);
        }
        clcnn_spec_append(f->b, ")");
        covers += (body > 0 ? body : 0) + (sc > 0 ? sc : 0);
    } else if (ls->max_in) {
        /* the current value first and nowhere else: left implicit, as written */
        int from = d->n_in > 1 && d->in[0] == f->cur;
        for (int k = 1; k < d->n_in && from; k++)
            from = d->in[k] != f->cur;
        clcnn_spec_append(f->b, "%s(", ls->name);
        for (int k = from; k < d->n_in; k++) {
            if (k > from) clcnn_spec_append(f->b, ",");
            format_ref(f, d->in[k]);
        }
        clcnn_spec_append(f->b, ")");
    } else if (ls->format) {
        ls->format(d, f->b);
    } else {
        format_args(d, ls, f->b);
    }
    f->cur = i;
    return covers;
}

/* The canonical text of entries [from, from + count), a group's body written inside its
 * parentheses. */
static void format_list(format_walk *f, int from, int count) {
    for (int i = from; i < from + count;) {
        if (i > from) clcnn_spec_append(f->b, " ");
        i += format_entry(f, i);
    }
}

size_t clcnn_spec_format(const clcnn_layer_desc *layers, int n, char *buf, size_t size) {
    clcnn_spec_buf b = {buf, buf ? size : 0, 0};
    if (b.size > 0) buf[0] = '\0';
    format_walk f = {layers, n, &b, -1, NULL};
    if (layers && n > 0) {
        /* first the labels the text needs, then the text */
        clcnn_spec_buf none = {NULL, 0, 0};
        format_walk first = {layers, n, &none, -1, calloc((size_t)n, 1)};
        if (first.need) format_list(&first, 0, n);
        f.need = first.need;
        format_list(&f, 0, n);
        free(first.need);
    }
    return b.len;
}

const clcnn_layer_syntax *clcnn_layer_syntax_of(clcnn_layer_kind k) {
    return (int)k >= 0 && (int)k < CLCNN_LAYER_COUNT ? syntaxes[k] : NULL;
}

const char *clcnn_layer_kind_name(clcnn_layer_kind k) {
    const clcnn_layer_syntax *ls = clcnn_layer_syntax_of(k);
    return ls ? ls->torch_name : "Unknown";
}

/* ---------------------------------------------------------------------------------------- */
/* Module paths and the graph as JSON                                                         */

/* Paths of l[from .. from + count) under prefix, indices from idx0. */
static clcnn_status path_list(const clcnn_layer_desc *l, int from, int count, const char *prefix,
                              int idx0, char (*paths)[CLCNN_SPEC_PATH_MAX], clcnn_error *e) {
    clcnn_status st;
    for (int i = from, idx = idx0; i < from + count; idx++) {
        const clcnn_layer_desc *d = &l[i];
        char own[CLCNN_SPEC_NAME_MAX];
        if (d->name[0])
            snprintf(own, sizeof own, "%s", d->name);
        else
            snprintf(own, sizeof own, "%d", idx);
        size_t plen = strlen(prefix), olen = strlen(own);
        if (plen + (plen > 0) + olen >= CLCNN_SPEC_PATH_MAX)
            return clcnn_fail(e, CLCNN_ERR_SPEC,
                              "model spec, column %d: the module path %s%s%s is longer than %d "
                              "bytes",
                              d->pos, prefix, plen ? "." : "", own, CLCNN_SPEC_PATH_MAX - 1);
        memcpy(paths[i], prefix, plen);
        if (plen) paths[i][plen++] = '.';
        memcpy(paths[i] + plen, own, olen + 1);
        if (d->kind == CLCNN_LAYER_RES) {
            int body = d->body, sc = d->shortcut;
            if ((st = path_list(l, i + 1, body, paths[i], 0, paths, e))) return st;
            if ((st = path_list(l, i + 1 + body, sc, paths[i], body, paths, e))) return st;
            i += 1 + body + sc;
            continue;
        }
        i++;
    }
    return CLCNN_SUCCESS;
}

clcnn_status clcnn_spec_paths(const clcnn_layer_desc *layers, int n,
                              char (*paths)[CLCNN_SPEC_PATH_MAX], clcnn_error *e) {
    return path_list(layers, 0, n, "", 0, paths, e);
}

/* Appends argument k of d: an integer, or a real number's shortest text. */
static void append_arg(const clcnn_layer_desc *d, const clcnn_layer_syntax *ls, int k,
                       clcnn_spec_buf *b) {
    if (ls->args[k].real)
        clcnn_spec_append_real(b, d->arg[k].r);
    else
        clcnn_spec_append(b, "%d", d->arg[k].i);
}

double clcnn_spec_arg(const clcnn_layer_desc *d, const char *name) {
    const clcnn_layer_syntax *ls = d ? clcnn_layer_syntax_of(d->kind) : NULL;
    for (int k = 0; ls && name && k < ls->n_args; k++)
        if (!strcmp(ls->args[k].name, name))
            return ls->args[k].real ? d->arg[k].r : (double)d->arg[k].i;
    return NAN;
}

/* "args": every argument the kind takes, with its value. */
static void json_args(const clcnn_layer_desc *d, const clcnn_layer_syntax *ls, clcnn_spec_buf *b) {
    clcnn_spec_append(b, "\"args\": {");
    for (int k = 0; k < ls->n_args; k++) {
        clcnn_spec_append(b, "%s\"%s\": ", k ? ", " : "", ls->args[k].name);
        append_arg(d, ls, k, b);
    }
    clcnn_spec_append(b, "}");
}

size_t clcnn_spec_json(const clcnn_layer_desc *layers, int n, char *buf, size_t size,
                       clcnn_error *e) {
    clcnn_spec_buf b = {buf, buf ? size : 0, 0};
    char(*paths)[CLCNN_SPEC_PATH_MAX] = calloc((size_t)(n > 0 ? n : 1), sizeof *paths);
    if (b.size > 0) buf[0] = '\0';
    if (!paths) return clcnn_fail(e, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory"), (size_t)-1;
    if (clcnn_spec_paths(layers, n, paths, e)) return free(paths), (size_t)-1;
    /* the canonical text holds only printable ASCII (the parser refuses the rest); quotes and
     * backslashes cannot occur in it */
    size_t len = clcnn_spec_format(layers, n, NULL, 0);
    char *text = malloc(len + 1);
    if (!text)
        return free(paths), clcnn_fail(e, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory"),
               (size_t)-1;
    clcnn_spec_format(layers, n, text, len + 1);
    clcnn_spec_append(&b, "{\"spec\": \"%s\", \"layers\": [", text);
    free(text);
    for (int i = 0; i < n; i++) {
        const clcnn_layer_desc *d = &layers[i];
        const clcnn_layer_syntax *ls = clcnn_layer_syntax_of(d->kind);
        clcnn_spec_append(&b, "%s\n  {\"index\": %d, \"kind\": \"%s\", \"torch\": \"%s\", ",
                          i ? "," : "", i, ls ? ls->name : "unknown",
                          clcnn_layer_kind_name(d->kind));
        clcnn_spec_append(&b, "\"path\": \"%s\", \"inputs\": [", paths[i]);
        for (int k = 0; k < d->n_in; k++)
            clcnn_spec_append(&b, "%s%d", k ? ", " : "", d->in[k]);
        clcnn_spec_append(&b, "], ");
        if (ls && ls->group)
            clcnn_spec_append(&b, "\"body\": %d, \"shortcut\": %d, ", d->body, d->shortcut);
        if (ls) json_args(d, ls, &b);
        clcnn_spec_append(&b, "}");
    }
    clcnn_spec_append(&b, "\n]}\n");
    free(paths);
    return b.len;
}

clcnn_status clcnn_spec_graph_json(const char *spec, char *json, size_t size, size_t *needed,
                                   char *err, size_t errsize) {
    clcnn_error e = {{0}, CLCNN_SUCCESS};
    clcnn_layer_desc *l = NULL;
    int n = 0;
    size_t len = (size_t)-1;
    if (needed) *needed = 0;
    if (json && size) json[0] = '\0';
    if (!json && size)
        clcnn_fail(&e, CLCNN_ERR_INVALID_ARGUMENT, "clcnn_spec_graph_json: NULL");
    else if (clcnn_spec_parse(spec, &l, &n, &e) == CLCNN_SUCCESS)
        len = clcnn_spec_json(l, n, json, size, &e);
    free(l);
    if (len != (size_t)-1 && needed) *needed = len;
    if (err && errsize) snprintf(err, errsize, "%s", e.msg);
    return e.code;
}
