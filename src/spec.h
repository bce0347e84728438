/* The model spec language: a short text such as "conv(32,5,pad=2) relu maxpool(2) flatten
 * linear(10)" turned into a flat list of layer descriptions, plus named presets. The grammar,
 * the defaults and the error messages are documented in docs/MODEL_SPEC.md. */
#ifndef CLCNN_SPEC_H
#define CLCNN_SPEC_H

#include <stddef.h>

#include "common.h"

/* Limits the parser enforces. Going past any of them is a CLCNN_ERR_SPEC, never a crash or a
 * large allocation, so the parser can take untrusted text (it is fuzzed). */
#define CLCNN_SPEC_MAX_LAYERS 256 /* layers after expanding repetitions */
#define CLCNN_SPEC_MAX_REPEAT 64  /* N in N*( ... ) */
#define CLCNN_SPEC_MAX_DEPTH 8    /* nested repetition groups */
/* CLCNN_SPEC_MAX_LEN (clcnn.h): bytes of spec text; keeps every column an int */

typedef enum clcnn_layer_kind {
    CLCNN_LAYER_CONV2D,
    CLCNN_LAYER_MAXPOOL2D,
    CLCNN_LAYER_RELU,
    CLCNN_LAYER_FLATTEN,
    CLCNN_LAYER_LINEAR
} clcnn_layer_kind;

/* One layer as written in the spec. Input sizes (channels, features) are not part of it: they
 * come from the data and the layers before, when the model is built. */
typedef struct clcnn_layer_desc {
    clcnn_layer_kind kind;
    int out;                 /* conv: out channels; linear: out features; else 0 */
    int kernel, stride, pad; /* conv and maxpool; else 0 */
    int bias;                /* conv and linear: 1 = has bias; else 0 */
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

/* The text of a preset ("seed", "seed-relu"; case-insensitive, exact), or NULL. */
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

#endif
