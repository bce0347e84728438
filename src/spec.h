/* The model spec language: a short text such as "conv(32,5,pad=2) relu maxpool(2) flatten
 * linear(10)" turned into a flat list of layer descriptions, plus named presets. The grammar,
 * the defaults and the error messages are documented in docs/MODEL_SPEC.md. */
#ifndef CLCNN_SPEC_H
#define CLCNN_SPEC_H

#include <stddef.h>

#include "common.h"
#include "layers/registry.h"

/* Limits the parser enforces. Going past any of them is a CLCNN_ERR_SPEC, never a crash or a
 * large allocation, so the parser can take untrusted text (it is fuzzed). */
#define CLCNN_SPEC_MAX_LAYERS 256 /* layers after expanding repetitions */
#define CLCNN_SPEC_MAX_REPEAT 64  /* N in N*( ... ) */
#define CLCNN_SPEC_MAX_DEPTH 8    /* nested groups: repetitions and residual blocks */
#define CLCNN_SPEC_MAX_LABELS 256 /* value labels ("x:") a spec defines, redefinitions included */
#define CLCNN_SPEC_NAME_MAX 48    /* bytes of a module name ("layer1.0.conv1") with its NUL */
#define CLCNN_SPEC_LABEL_MAX 24   /* bytes of a value label with its NUL */
/* Bytes of a layer's module path with its NUL ("layer1.0.downsample.1"); with the longest
 * parameter name after it (".num_batches_tracked") it fits CLCNN_PARAM_NAME_MAX. */
#define CLCNN_SPEC_PATH_MAX 72
/* The most inputs a node reads (add, cat, mul and the residual sum; every other kind reads
 * one). */
#define CLCNN_MAX_INPUTS 64
/* CLCNN_SPEC_MAX_LEN (clcnn.h): bytes of spec text; keeps every column an int */

/* One value per line of src/layers/registry.h, in its order: CLCNN_LAYER_CONV2D, ... */
typedef enum clcnn_layer_kind {
#define CLCNN_LAYER_ENUM_(UPPER, lower, kernels) CLCNN_LAYER_##UPPER,
    CLCNN_LAYER_LIST(CLCNN_LAYER_ENUM_, CLCNN_LAYER_NO_KERNELS_)
#undef CLCNN_LAYER_ENUM_
} clcnn_layer_kind;

/* How many kinds there are. Outside the enum, so that a switch over the kinds needs no case
 * for it. */
#define CLCNN_LAYER_ONE_(UPPER, lower, kernels) +1
enum { CLCNN_LAYER_COUNT = 0 CLCNN_LAYER_LIST(CLCNN_LAYER_ONE_, CLCNN_LAYER_NO_KERNELS_) };
#undef CLCNN_LAYER_ONE_

/* The most arguments a layer kind takes. */
#define CLCNN_LAYER_MAX_ARGS 8

/* One argument's value: .i for an integer argument, .r for a real number. */
typedef union clcnn_arg_value {
    int i;
    double r;
} clcnn_arg_value;

/* One layer as written in the spec. Input sizes (channels, features) are not part of it: they
 * come from the data and the layers before, when the model is built.
 *
 * The list is a graph in the order it was written: each entry reads values, each a number v,
 * the output of entry v (-1: the model's input). An entry reads the value before it unless the
 * spec says otherwise ("@x" sets the current value; add, cat and mul read the values they name).
 * A residual block's entry comes before its body (and shortcut) entries, its value is its sum. */
typedef struct clcnn_layer_desc {
    clcnn_layer_kind kind;
    /* Its arguments, in the order of its kind's table (clcnn_layer_syntax.args), each with its
     * default where the text leaves it out: only the layer's own unit reads them by index
     * (clcnn_spec_arg reads one by name). */
    clcnn_arg_value arg[CLCNN_LAYER_MAX_ARGS];
    int body;     /* res: how many entries after this one are its body */
    int shortcut; /* res: how many entries after the body are its shortcut (0: the block's
                   * input is the shortcut) */
    /* The values it reads. A layer: in[0]. A residual block: in[0] the block's input, in[1] the
     * body's value and, with a shortcut, in[2] the shortcut's. add, cat, mul: their inputs. */
    int n_in, in[CLCNN_MAX_INPUTS];
    char name[CLCNN_SPEC_NAME_MAX];   /* "name=": its module name within its group; "" = index */
    char label[CLCNN_SPEC_LABEL_MAX]; /* "x:" after it: the label of its value; "" = none */
    int pos; /* 1-based column in the spec text where the layer starts (for later shape errors);
              * for a preset, the column in the preset's text */
} clcnn_layer_desc;

/* Parses spec, or a preset name (the whole spec, case-insensitive, surrounding whitespace
 * ignored). On success *layers is a malloc'd array of *n (1..CLCNN_SPEC_MAX_LAYERS) entries,
 * which the caller frees. On failure *layers is NULL, *n is 0 and e holds one line naming the
 * 1-based column and what was expected, and quoting the spec, e.g. `model spec, column 15: pad
 * expects a non-negative integer, got 'x' (in "conv(32,5,pad=x)")`. Bad text, including an
 * empty spec, is CLCNN_ERR_SPEC; a NULL argument is CLCNN_ERR_INVALID_ARGUMENT. */
clcnn_status clcnn_spec_parse(const char *spec, clcnn_layer_desc **layers, int *n, clcnn_error *e);

/* The module path of every entry of layers[0..n) into paths[i]: its index in its list (at the
 * top "0", "1", ...; in a residual block the block's path, '.', and the index, the shortcut's
 * entries numbered after the body's), or its module name, also relative to the block. A path
 * longer than CLCNN_SPEC_PATH_MAX - 1 bytes is CLCNN_ERR_SPEC, naming the layer. */
clcnn_status clcnn_spec_paths(const clcnn_layer_desc *layers, int n,
                              char (*paths)[CLCNN_SPEC_PATH_MAX], clcnn_error *e);

/* The graph of layers[0..n) as JSON (docs/MODEL_SPEC.md, "The graph as JSON"), snprintf-style:
 * at most size bytes including the NUL (buf may be NULL when size is 0); returns the length
 * the full text needs, or (size_t)-1 with e set when a path is too long or memory runs out. */
size_t clcnn_spec_json(const clcnn_layer_desc *layers, int n, char *buf, size_t size,
                       clcnn_error *e);

/* The text of a preset ("seed", "seed-relu", "resnet", "resnet18"; case-insensitive, exact), or
 * NULL. */
const char *clcnn_spec_preset(const char *name);

/* Canonical text of a layer list, which parses back to the same list (except pos), e.g.
 * "conv(32,5,stride=1,pad=2) maxpool(2,stride=2) relu flatten linear(10)": conv always shows
 * stride and pad, maxpool always shows stride and shows pad when it is not 0, bias=0 appears
 * only when a layer has no bias. Like snprintf: writes at most size bytes including the NUL
 * (buf may be NULL when size is 0) and returns the length the full text needs. */
size_t clcnn_spec_format(const clcnn_layer_desc *layers, int n, char *buf, size_t size);

/* PyTorch name of a layer kind ("Conv2d", "MaxPool2d", "ReLU", "Flatten", "Linear"); "Unknown"
 * for a value outside the enum. Never NULL. */
const char *clcnn_layer_kind_name(clcnn_layer_kind k);

/* ---------------------------------------------------------------------------------------- */
/* Layer syntax: what each layer kind defines so that the parser and the formatter know it  */

/* How an argument may be written and how the canonical text writes it. */
enum {
    CLCNN_ARGF_POS = 1 << 0,       /* may be written positionally (positions in table order) */
    CLCNN_ARGF_KW = 1 << 1,        /* may be written by keyword, NAME= or ALIAS= */
    CLCNN_ARGF_REQ = 1 << 2,       /* must be given (positional ones before the optional) */
    CLCNN_ARGF_ABOVE_MIN = 1 << 3, /* a real number greater than min, not min itself */
    CLCNN_ARGF_SHOW_KW = 1 << 4,   /* the canonical text writes it always, by keyword */
    CLCNN_ARGF_SHOW_POS = 1 << 5,  /* the canonical text writes it always, positionally */
};

/* One argument a layer kind takes, declared in its own unit. The canonical text writes a
 * required argument positionally, one with a SHOW flag as that says, and any other by keyword
 * when it differs from its default. */
typedef struct clcnn_arg_def {
    const char *name;  /* its keyword, and its name in messages and the JSON ("stride") */
    const char *alias; /* another keyword for it ("padding"), or NULL */
    int real;          /* 0: an integer in min..max; 1: a finite real number in [min, max] */
    double min, max;   /* its range (real numbers: -DBL_MAX and DBL_MAX for none) */
    double def;        /* its value when not given */
    unsigned flags;    /* CLCNN_ARGF_* */
} clcnn_arg_def;

/* How an argument was given. */
enum { CLCNN_ARG_UNSET, CLCNN_ARG_POS, CLCNN_ARG_KW };

/* How each argument of one layer was given, for a kind's finish: CLCNN_ARG_* and the offset of
 * its value in the text (for clcnn_spec_fail), by the index in its table. */
typedef struct clcnn_layer_args {
    int how[CLCNN_LAYER_MAX_ARGS];
    size_t col[CLCNN_LAYER_MAX_ARGS];
    int npos; /* positional arguments given */
} clcnn_layer_args;

/* The value of d's argument called name as a double (an integer converted), or NAN when its
 * kind has no such argument. For code outside the layer's unit: tests, messages. */
double clcnn_spec_arg(const clcnn_layer_desc *d, const char *name);

typedef struct clcnn_spec_parser clcnn_spec_parser; /* one parse in progress */
typedef struct clcnn_spec_buf clcnn_spec_buf;       /* the text clcnn_spec_format builds */

/* Records `model spec, column <at + 1>: <message> (in "<spec>")` as the parse's error and
 * returns CLCNN_ERR_SPEC. at is a byte offset in the text, such as a clcnn_layer_args col. */
clcnn_status clcnn_spec_fail(const clcnn_spec_parser *p, size_t at, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Appends the shortest decimal text of v that reads back as v ("0.1", "1e-05"). */
void clcnn_spec_append_real(clcnn_spec_buf *b, double v);

/* Appends printf-formatted text to b; what does not fit is counted but not written. */
void clcnn_spec_append(clcnn_spec_buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#define CLCNN_LAYER_MAX_ALIASES 4

/* Everything the parser, the formatter and the messages know of one layer kind. Each kind
 * defines one, clcnn_<lower>_syntax (declared below from registry.h). */
typedef struct clcnn_layer_syntax {
    const char *name; /* canonical: what clcnn_spec_format writes and messages say */
    const char *aliases[CLCNN_LAYER_MAX_ALIASES]; /* other names it accepts; unused entries NULL */
    const char *torch_name;    /* PyTorch class name, for clcnn_layer_kind_name */
    const clcnn_arg_def *args; /* its arguments (the messages list them from here) */
    int n_args;                /* how many (at most CLCNN_LAYER_MAX_ARGS) */
    /* Checks what the ranges of single arguments do not, and sets defaults that depend on other
     * arguments (a failure goes through clcnn_spec_fail). d arrives with kind, pos and its
     * arguments set, those not given to their defaults; a says how each was given. NULL:
     * nothing more to check. */
    clcnn_status (*finish)(const clcnn_spec_parser *p, const clcnn_layer_args *a,
                           clcnn_layer_desc *d);
    /* Appends d's canonical text, which parses back to d. NULL: the rule of clcnn_arg_def. */
    void (*format)(const clcnn_layer_desc *d, clcnn_spec_buf *b);
    /* 1: the layer takes a group of layers in its parentheses, "res( layers )", instead of
     * arguments; its body entries follow it in the list (clcnn_layer_desc.body). */
    int group;
    /* For a layer that joins values ("add(@a, @b)"): the fewest and the most inputs it reads,
     * the current value included (0: the layer reads the current value alone). */
    int min_in, max_in;
} clcnn_layer_syntax;

/* A syntax's args and n_args from a table: `CLCNN_SPEC_ARGS(conv_args),`. */
#define CLCNN_SPEC_ARGS(table) .args = (table), .n_args = (int)(sizeof(table) / sizeof((table)[0]))

#define CLCNN_LAYER_SYNTAX_(UPPER, lower, kernels)                                                 \
    extern const clcnn_layer_syntax clcnn_##lower##_syntax;
CLCNN_LAYER_LIST(CLCNN_LAYER_SYNTAX_, CLCNN_LAYER_NO_KERNELS_)
#undef CLCNN_LAYER_SYNTAX_

/* The syntax of a layer kind; NULL for a value outside the enum. */
const clcnn_layer_syntax *clcnn_layer_syntax_of(clcnn_layer_kind k);

#endif
