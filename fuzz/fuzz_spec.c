/* libFuzzer harness: the model spec parser. On success the canonical text
 * (clcnn_spec_format) must parse back to the same layers and graph (inputs, blocks, module
 * names), the limits of spec.h must hold and the graph's JSON must be written whole; on failure
 * the message must be one line naming a column. */
#include <stdlib.h>
#include <string.h>

#include "spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The same arguments, bit for bit (a real's canonical text reads back exactly), by the kind's
 * table. */
static int same_args(const clcnn_layer_desc *a, const clcnn_layer_desc *b) {
    const clcnn_layer_syntax *ls = clcnn_layer_syntax_of(a->kind);
    for (int k = 0; ls && k < ls->n_args; k++)
        if (ls->args[k].real ? memcmp(&a->arg[k].r, &b->arg[k].r, sizeof(double))
                             : a->arg[k].i != b->arg[k].i)
            return 0;
    return 1;
}

static int same(const clcnn_layer_desc *a, const clcnn_layer_desc *b) {
    int same = a->kind == b->kind && same_args(a, b) && a->n_in == b->n_in && a->body == b->body &&
               a->shortcut == b->shortcut && !strcmp(a->name, b->name);
    for (int k = 0; same && k < a->n_in; k++)
        same = a->in[k] == b->in[k];
    return same;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *spec = malloc(size + 1);
    clcnn_layer_desc *layers = NULL, *again = NULL;
    int n = 0, m = 0;
    clcnn_error e = {0};
    if (!spec) return 0;
    memcpy(spec, data, size);
    spec[size] = '\0';
    clcnn_status st = clcnn_spec_parse(spec, &layers, &n, &e);
    if (st == CLCNN_SUCCESS) {
        if (!layers || n < 1 || n > CLCNN_SPEC_MAX_LAYERS) abort();
        size_t len = clcnn_spec_format(layers, n, NULL, 0);
        char *text = malloc(len + 1);
        if (!text || clcnn_spec_format(layers, n, text, len + 1) != len || strlen(text) != len)
            abort();
        if (clcnn_spec_parse(text, &again, &m, &e) != CLCNN_SUCCESS || m != n) abort();
        for (int i = 0; i < n; i++)
            if (!same(&layers[i], &again[i]) || layers[i].pos < 1) abort();
        /* every value read is made before it is read */
        for (int i = 0; i < n; i++)
            for (int k = 0; k < layers[i].n_in; k++)
                if (layers[i].in[k] < -1 || layers[i].in[k] >= n) abort();
        size_t jlen = clcnn_spec_json(layers, n, NULL, 0, &e);
        if (jlen != (size_t)-1) {
            char *json = malloc(jlen + 1);
            if (!json || clcnn_spec_json(layers, n, json, jlen + 1, &e) != jlen ||
                strlen(json) != jlen)
                abort();
            free(json);
        }
        free(text);
        free(again);
    } else {
        if (layers || n != 0 || !e.msg[0] || strchr(e.msg, '\n')) abort();
    }
    free(layers);
    free(spec);
    return 0;
}
