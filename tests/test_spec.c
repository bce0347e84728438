/* Model spec parser tests: presets field by field, aliases and case, positional and keyword
 * arguments, defaults, repetition, separators, the canonical text round trip, a table of bad
 * specs with the column each message must name, and a seeded fuzz loop (run under ASan). */
#include <stdarg.h>

#include "spec.h"

#include "testutil.h"

#define CONV CLCNN_LAYER_CONV2D
#define MAXP CLCNN_LAYER_MAXPOOL2D
#define RELU CLCNN_LAYER_RELU
#define FLAT CLCNN_LAYER_FLATTEN
#define LIN CLCNN_LAYER_LINEAR

/* Expected layers; pos 0 means "not checked". The arguments go where each kind's table has
 * them: conv (out, kernel, stride, pad, bias), maxpool (kernel, stride, pad), linear (out,
 * bias); relu and flatten take none. */
#define A_(kind_, out_, k, s, p, b)                                                                \
    {                                                                                              \
        {.i = (kind_) == CONV || (kind_) == LIN ? (out_)                                           \
              : (kind_) == MAXP                 ? (k)                                              \
                                                : 0},                                                              \
            {.i = (kind_) == CONV   ? (k)                                                          \
                  : (kind_) == MAXP ? (s)                                                          \
                  : (kind_) == LIN  ? (b)                                                          \
                                    : 0},                                                           \
            {.i = (kind_) == CONV   ? (s)                                                          \
                  : (kind_) == MAXP ? (p)                                                          \
                                    : 0},                                                          \
            {.i = (kind_) == CONV ? (p) : 0}, {.i = (kind_) == CONV ? (b) : 0},                    \
    }
#define L(kind_, out_, k, s, p, b, pos_)                                                           \
    { .kind = kind_, .arg = A_(kind_, out_, k, s, p, b), .pos = pos_ }

/* Whether a and b, of one kind, have the same arguments (by their kind's table). */
static int same_args(const clcnn_layer_desc *a, const clcnn_layer_desc *b) {
    const clcnn_layer_syntax *ls = clcnn_layer_syntax_of(a->kind);
    for (int k = 0; ls && k < ls->n_args; k++)
        if (ls->args[k].real ? a->arg[k].r != b->arg[k].r : a->arg[k].i != b->arg[k].i) return 0;
    return 1;
}

/* The arguments and the graph: module name, a block's body and shortcut, and the inputs unless
 * b leaves them out (n_in 0). Labels may be renamed by the canonical text: not compared. */
static int same_layer(const clcnn_layer_desc *a, const clcnn_layer_desc *b, int check_pos) {
    int same = a->kind == b->kind && same_args(a, b) && (!check_pos || a->pos == b->pos) &&
               a->body == b->body && a->shortcut == b->shortcut && !strcmp(a->name, b->name);
    if (b->n_in == 0) return same; /* an expected layer that leaves the inputs out */
    same = same && a->n_in == b->n_in;
    for (int k = 0; same && k < a->n_in; k++)
        same = a->in[k] == b->in[k];
    return same;
}

static void print_layer(const char *what, const clcnn_layer_desc *d) {
    const clcnn_layer_syntax *ls = clcnn_layer_syntax_of(d->kind);
    fprintf(stderr, "    %s: %s", what, clcnn_layer_kind_name(d->kind));
    for (int k = 0; ls && k < ls->n_args; k++)
        fprintf(stderr, " %s=%g", ls->args[k].name, clcnn_spec_arg(d, ls->args[k].name));
    fprintf(stderr, " pos=%d\n", d->pos);
}

/* Parses spec and compares with want[0..nwant), every field (pos when want's is not 0). */
static void expect_layers(int line, const char *spec, const clcnn_layer_desc *want, int nwant) {
    clcnn_layer_desc *got = NULL;
    clcnn_error e = {0};
    int n = -1;
    clcnn_status st = clcnn_spec_parse(spec, &got, &n, &e);
    if (st != CLCNN_SUCCESS) {
        fprintf(stderr, "%s:%d: \"%s\" failed: %s\n", __FILE__, line, spec, e.msg);
        test_failures++;
        return;
    }
    if (n != nwant) {
        fprintf(stderr, "%s:%d: \"%s\" gave %d layers, want %d\n", __FILE__, line, spec, n, nwant);
        test_failures++;
    }
    for (int i = 0; i < n && i < nwant; i++) {
        if (!same_layer(&got[i], &want[i], want[i].pos != 0)) {
            fprintf(stderr, "%s:%d: \"%s\" layer %d differs\n", __FILE__, line, spec, i);
            print_layer("got ", &got[i]);
            print_layer("want", &want[i]);
            test_failures++;
        }
    }
    free(got);
}

#define EXPECT(spec, ...)                                                                          \
    do {                                                                                           \
        static const clcnn_layer_desc want_[] = {__VA_ARGS__};                                     \
        expect_layers(__LINE__, spec, want_, (int)(sizeof want_ / sizeof want_[0]));               \
    } while (0)

/* Both specs parse, to the same list (pos aside). */
static void expect_same(int line, const char *a, const char *b) {
    clcnn_layer_desc *la = NULL, *lb = NULL;
    clcnn_error e = {0};
    int na = 0, nb = 0, ok;
    ok = clcnn_spec_parse(a, &la, &na, &e) == CLCNN_SUCCESS;
    if (!ok) fprintf(stderr, "%s:%d: \"%s\" failed: %s\n", __FILE__, line, a, e.msg);
    ok = ok && clcnn_spec_parse(b, &lb, &nb, &e) == CLCNN_SUCCESS;
    if (!ok && la) fprintf(stderr, "%s:%d: \"%s\" failed: %s\n", __FILE__, line, b, e.msg);
    for (int i = 0; ok && i < na; i++)
        ok = na == nb && same_layer(&la[i], &lb[i], 0);
    if (!ok) {
        fprintf(stderr, "%s:%d: \"%s\" and \"%s\" differ\n", __FILE__, line, a, b);
        test_failures++;
    }
    free(la);
    free(lb);
}
#define SAME(a, b) expect_same(__LINE__, a, b)

/* format(parse(spec)) equals want (when not NULL) and parses back to the same list. */
static void expect_round_trip(int line, const char *spec, const char *want) {
    clcnn_layer_desc *l1 = NULL, *l2 = NULL;
    clcnn_error e = {0};
    int n1 = 0, n2 = 0;
    char text[4096];
    if (clcnn_spec_parse(spec, &l1, &n1, &e) != CLCNN_SUCCESS) {
        fprintf(stderr, "%s:%d: \"%s\" failed: %s\n", __FILE__, line, spec, e.msg);
        test_failures++;
        return;
    }
    size_t len = clcnn_spec_format(l1, n1, text, sizeof text);
    if (len >= sizeof text || strlen(text) != len || (want && strcmp(text, want) != 0)) {
        fprintf(stderr, "%s:%d: format of \"%s\" is \"%s\" (%zu), want \"%s\"\n", __FILE__, line,
                spec, text, len, want ? want : "(any)");
        test_failures++;
    }
    if (clcnn_spec_parse(text, &l2, &n2, &e) != CLCNN_SUCCESS || n2 != n1) {
        fprintf(stderr, "%s:%d: canonical \"%s\" does not parse back: %s\n", __FILE__, line, text,
                e.msg);
        test_failures++;
    } else {
        for (int i = 0; i < n1; i++) {
            if (!same_layer(&l1[i], &l2[i], 0)) {
                fprintf(stderr, "%s:%d: \"%s\" layer %d changed in the round trip\n", __FILE__,
                        line, spec, i);
                test_failures++;
            }
        }
    }
    free(l1);
    free(l2);
}
#define ROUND_TRIP(spec, want) expect_round_trip(__LINE__, spec, want)

static void test_presets(void) {
    const char *seed = clcnn_spec_preset("seed");
    CHECK(seed != NULL);
    CHECK(clcnn_spec_preset("SEED") == seed);
    CHECK(clcnn_spec_preset("Seed-ReLU") != NULL);
    CHECK(clcnn_spec_preset("seed ") == NULL); /* the lookup itself is exact */
    CHECK(clcnn_spec_preset("seedx") == NULL);
    CHECK(clcnn_spec_preset("") == NULL);
    CHECK(clcnn_spec_preset(NULL) == NULL);
    CHECK(seed && strcmp(seed, "conv(32,5,pad=2) maxpool(2) conv(32,5,pad=2) maxpool(2) "
                               "conv(64,5,pad=2) maxpool(2) flatten linear(64) linear(10)") == 0);

    /* pos is the column in the preset's text. */
    EXPECT("seed", L(CONV, 32, 5, 1, 2, 1, 1), L(MAXP, 0, 2, 2, 0, 0, 18),
           L(CONV, 32, 5, 1, 2, 1, 29), L(MAXP, 0, 2, 2, 0, 0, 46), L(CONV, 64, 5, 1, 2, 1, 57),
           L(MAXP, 0, 2, 2, 0, 0, 74), L(FLAT, 0, 0, 0, 0, 0, 85), L(LIN, 64, 0, 0, 0, 1, 93),
           L(LIN, 10, 0, 0, 0, 1, 104));
    EXPECT(" \tSEED-relu\n", L(CONV, 32, 5, 1, 2, 1, 1), L(RELU, 0, 0, 0, 0, 0, 18),
           L(MAXP, 0, 2, 2, 0, 0, 23), L(CONV, 32, 5, 1, 2, 1, 34), L(RELU, 0, 0, 0, 0, 0, 51),
           L(MAXP, 0, 2, 2, 0, 0, 56), L(CONV, 64, 5, 1, 2, 1, 67), L(RELU, 0, 0, 0, 0, 0, 84),
           L(MAXP, 0, 2, 2, 0, 0, 89), L(FLAT, 0, 0, 0, 0, 0, 100), L(LIN, 64, 0, 0, 0, 1, 108),
           L(RELU, 0, 0, 0, 0, 0, 119), L(LIN, 10, 0, 0, 0, 1, 124));
    SAME("seed", clcnn_spec_preset("seed"));
    SAME("seed-relu", clcnn_spec_preset("seed-relu"));
    SAME("ResNet", clcnn_spec_preset("resnet"));
    ROUND_TRIP("resnet", NULL);
}

static void test_names_and_args(void) {
    /* Aliases and case. */
    EXPECT("CONV2D(8,3) Conv(8,3) MP(2) MaxPool2d(2) maxpool(2) ReLU RELU() FLATTEN() Flatten "
           "FC(10) Linear(10, BIAS=0) linear(7,Bias=1)",
           L(CONV, 8, 3, 1, 0, 1, 1), L(CONV, 8, 3, 1, 0, 1, 13), L(MAXP, 0, 2, 2, 0, 0, 23),
           L(MAXP, 0, 2, 2, 0, 0, 29), L(MAXP, 0, 2, 2, 0, 0, 42), L(RELU, 0, 0, 0, 0, 0, 53),
           L(RELU, 0, 0, 0, 0, 0, 58), L(FLAT, 0, 0, 0, 0, 0, 65), L(FLAT, 0, 0, 0, 0, 0, 75),
           L(LIN, 10, 0, 0, 0, 1, 83), L(LIN, 10, 0, 0, 0, 0, 90), L(LIN, 7, 0, 0, 0, 1, 109));
    EXPECT("conv(16, 3, PADDING=1, Stride=2)", L(CONV, 16, 3, 2, 1, 1, 1));

    /* Positional and keyword forms of the same layer. */
    EXPECT("conv(8,3,2,1)", L(CONV, 8, 3, 2, 1, 1, 1));
    SAME("conv(8,3,2,1)", "conv(8,3,stride=2,pad=1)");
    SAME("conv(8,3,2,1)", "conv(8,3,2,pad=1)");
    SAME("conv(8,3,2,1)", "conv(8,3,padding=1,stride=2)");
    SAME("conv(8,3,2,1,bias=0)", "conv(8,3,bias=0,pad=1,stride=2)");
    EXPECT("conv(8,3,bias=0)", L(CONV, 8, 3, 1, 0, 0, 1));
    SAME("maxpool(3,2,1)", "maxpool(3,stride=2,pad=1)");
    SAME("maxpool(3,2,1)", "mp(3,2,padding=1)");
    EXPECT("linear(5,bias=0) linear(65536)", L(LIN, 5, 0, 0, 0, 0, 1),
           L(LIN, 65536, 0, 0, 0, 1, 18));

    /* Defaults: conv stride 1, pad 0, bias 1; maxpool stride = kernel, pad 0; linear bias 1. */
    EXPECT("conv(4,3)", L(CONV, 4, 3, 1, 0, 1, 1));
    EXPECT("maxpool(3)", L(MAXP, 0, 3, 3, 0, 0, 1));
    EXPECT("maxpool(3,1)", L(MAXP, 0, 3, 1, 0, 0, 1));
    EXPECT("maxpool(3,pad=1)", L(MAXP, 0, 3, 3, 1, 0, 1));
    EXPECT("maxpool(2,pad=1) maxpool(1)", L(MAXP, 0, 2, 2, 1, 0, 1), L(MAXP, 0, 1, 1, 0, 0, 18));
    EXPECT("linear(5)", L(LIN, 5, 0, 0, 0, 1, 1));
    /* Limits are inclusive; leading zeros are still decimal. */
    EXPECT("conv(65536,64,64,64)", L(CONV, 65536, 64, 64, 64, 1, 1));
    EXPECT("conv(007,03)", L(CONV, 7, 3, 1, 0, 1, 1));
}

static void test_repetition(void) {
    EXPECT("3*(conv(32,5,pad=2) relu maxpool(2)) flatten linear(10)", L(CONV, 32, 5, 1, 2, 1, 4),
           L(RELU, 0, 0, 0, 0, 0, 21), L(MAXP, 0, 2, 2, 0, 0, 26), L(CONV, 32, 5, 1, 2, 1, 4),
           L(RELU, 0, 0, 0, 0, 0, 21), L(MAXP, 0, 2, 2, 0, 0, 26), L(CONV, 32, 5, 1, 2, 1, 4),
           L(RELU, 0, 0, 0, 0, 0, 21), L(MAXP, 0, 2, 2, 0, 0, 26), L(FLAT, 0, 0, 0, 0, 0, 38),
           L(LIN, 10, 0, 0, 0, 1, 46));
    EXPECT("2*(relu 3*(flatten))", L(RELU, 0, 0, 0, 0, 0, 4), L(FLAT, 0, 0, 0, 0, 0, 12),
           L(FLAT, 0, 0, 0, 0, 0, 12), L(FLAT, 0, 0, 0, 0, 0, 12), L(RELU, 0, 0, 0, 0, 0, 4),
           L(FLAT, 0, 0, 0, 0, 0, 12), L(FLAT, 0, 0, 0, 0, 0, 12), L(FLAT, 0, 0, 0, 0, 0, 12));
    EXPECT("2 * ( relu ) ,1*(linear(3))", L(RELU, 0, 0, 0, 0, 0, 7), L(RELU, 0, 0, 0, 0, 0, 7),
           L(LIN, 3, 0, 0, 0, 1, 18));
    EXPECT("1*(1*(1*(1*(1*(1*(1*(1*(relu))))))))", L(RELU, 0, 0, 0, 0, 0, 25)); /* depth 8 */
    SAME("2*(conv(8,3), relu)", "conv(8,3) relu conv(8,3) relu");
    SAME("seed", "2*(conv(32,5,pad=2) maxpool(2)) conv(64,5,pad=2) maxpool(2) flatten linear(64) "
                 "linear(10)");

    /* Exactly CLCNN_SPEC_MAX_LAYERS, by repetition and written out. */
    clcnn_layer_desc *l = NULL;
    clcnn_error e = {0};
    int n = 0;
    CHECK(clcnn_spec_parse("4*(64*(relu))", &l, &n, &e) == CLCNN_SUCCESS && n == 256);
    free(l);
    char many[256 * 5 + 1] = "";
    for (int i = 0; i < 256; i++)
        strcat(many, "relu ");
    l = NULL;
    CHECK(clcnn_spec_parse(many, &l, &n, &e) == CLCNN_SUCCESS && n == 256);
    free(l);
}

/* Entry i of spec reads the n values given (-1: the input). */
static void expect_inputs(int line, const char *spec, int i, int n, ...) {
    clcnn_layer_desc *l = NULL;
    clcnn_error e = {0};
    int nl = 0, ok;
    va_list ap;
    ok = clcnn_spec_parse(spec, &l, &nl, &e) == CLCNN_SUCCESS && i < nl && l[i].n_in == n;
    va_start(ap, n);
    for (int k = 0; ok && k < n; k++)
        ok = l[i].in[k] == va_arg(ap, int);
    va_end(ap);
    if (!ok) {
        fprintf(stderr, "%s:%d: \"%s\" entry %d does not read the values expected (%s)\n", __FILE__,
                line, spec, i, e.msg);
        if (l && i < nl)
            for (int k = 0; k < l[i].n_in; k++)
                fprintf(stderr, "    in[%d] = %d\n", k, l[i].in[k]);
        test_failures++;
    }
    free(l);
}
#define INPUTS(spec, i, ...) expect_inputs(__LINE__, spec, i, __VA_ARGS__)

/* The graph form: labels, references, joining layers, projection shortcuts, module names. */
static void test_graph(void) {
    /* a chain reads the value before; a label changes nothing */
    INPUTS("conv(8,3) relu", 0, 1, -1);
    INPUTS("x: conv(8,3) relu", 1, 1, 0);
    /* x: names the layer after it; add reads the current value first, then the named ones */
    INPUTS("x: conv(8,3) relu add(@x)", 2, 2, 1, 0);
    INPUTS("x: conv(8,3) y: relu add(@y, @x)", 2, 2, 1, 0);
    INPUTS("x: conv(8,3) relu add(@x, @x, @input)", 2, 4, 1, 0, 0, -1);
    /* the current value among the named ones keeps its place */
    INPUTS("x: conv(8,3) y: relu cat(@x, @y)", 2, 2, 0, 1);
    /* @x makes x current */
    INPUTS("x: conv(8,3) relu @x conv(4,1) cat(@x)", 2, 1, 0);
    INPUTS("x: conv(8,3) relu @x conv(4,1) cat(@x)", 3, 2, 2, 0);
    INPUTS("conv(8,3) mul(@input)", 1, 2, 0, -1);
    /* scale's alias mul stays scale; mul(@x) is the product */
    EXPECT("mul(0.5)", {.kind = CLCNN_LAYER_SCALE, .arg = {{.r = 0.5}}, .n_in = 1, .in = {-1}});
    INPUTS("x: conv(8,3) globalavgpool mul(@x)", 2, 2, 1, 0);
    /* residual blocks: in[0] the block's input, in[1] the body's value, in[2] the shortcut's */
    INPUTS("relu res(conv(8,3) relu)", 1, 2, 0, 3);
    INPUTS("relu res(conv(8,3) relu | conv(8,1) bn)", 1, 3, 0, 3, 5);
    INPUTS("relu res(conv(8,3) relu | conv(8,1) bn)", 4, 1, 0); /* the shortcut reads the input */
    INPUTS("relu res(conv(8,3) relu | conv(8,1) bn) relu", 6, 1, 1);
    INPUTS("x: res(relu) add(@input)", 2, 2, 0, -1); /* a label names the block's sum */
    /* each copy of a repetition reads the one before, its labels its own */
    INPUTS("2*(x: relu conv(8,3) add(@x)) relu", 2, 2, 1, 0);
    INPUTS("2*(x: relu conv(8,3) add(@x)) relu", 3, 1, 2);
    INPUTS("2*(x: relu conv(8,3) add(@x)) relu", 5, 2, 4, 3);
    INPUTS("2*(x: relu conv(8,3) add(@x)) relu", 6, 1, 5);
    /* module names */
    EXPECT("layer1.0.conv1=conv(8,3) fc=linear(10)",
           {.kind = CLCNN_LAYER_CONV2D,
            .arg = A_(CONV, 8, 3, 1, 0, 1),
            .n_in = 1,
            .in = {-1},
            .name = "layer1.0.conv1"},
           {.kind = CLCNN_LAYER_LINEAR,
            .arg = A_(LIN, 10, 0, 0, 0, 1),
            .n_in = 1,
            .in = {0},
            .name = "fc"});
    ROUND_TRIP("x: conv(8,3) relu add(@x)", "x: conv(8,3,stride=1,pad=0) relu add(@x)");
    ROUND_TRIP("x: conv(8,3) y: relu cat(@x, @y)",
               "x: conv(8,3,stride=1,pad=0) y: relu cat(@x,@y)");
    ROUND_TRIP("x: conv(8,3) relu @x conv(4,1) cat(@x)",
               "x: conv(8,3,stride=1,pad=0) relu @x conv(4,1,stride=1,pad=0) cat(@x)");
    ROUND_TRIP("x: conv(8,3) relu @x cat(@x, @x)", NULL);
    ROUND_TRIP("y: relu @input add(@y)", "y: relu add(@input,@y)");
    /* labels that a repetition repeats are made unique */
    ROUND_TRIP("2*(x: relu conv(8,3) add(@x)) relu",
               "x_0: relu conv(8,3,stride=1,pad=0) add(@x_0) x_3: relu "
               "conv(8,3,stride=1,pad=0) add(@x_3) relu");
    ROUND_TRIP("b=res(c1=conv(8,3,pad=1) bn | downsample.0=conv(8,1) downsample.1=bn) relu",
               "b=res(c1=conv(8,3,stride=1,pad=1) bn | downsample.0=conv(8,1,stride=1,pad=0) "
               "downsample.1=bn) relu");
    ROUND_TRIP("x: relu res(conv(8,3) | @x relu) mul(@x)", NULL);
    ROUND_TRIP("x: fc=linear(4) relu add(@x)", "x: fc=linear(4) relu add(@x)");
    ROUND_TRIP("resnet18", NULL);
    SAME("x:relu add(@input)", "x: relu add( @input )");
}

static void test_separators(void) {
    SAME("relu,relu", "relu relu");
    SAME("relu , relu", "relu relu");
    SAME(" \t\nrelu,\n  flatten  ", "relu flatten");
    SAME("relu\r\n\v\fflatten", "relu flatten");
    SAME("conv( 8 , 3 , pad = 1 )", "conv(8,3,pad=1)");
    SAME("conv (8,3) relu ()", "conv(8,3) relu");
    SAME("conv(8,3),relu,maxpool(2),flatten,linear(10)", "conv(8,3) relu maxpool(2) flatten "
                                                         "linear(10)");
    SAME("2*(relu),2*(flatten)", "relu relu flatten flatten");
}

static void test_format(void) {
    ROUND_TRIP("seed", "conv(32,5,stride=1,pad=2) maxpool(2,stride=2) conv(32,5,stride=1,pad=2) "
                       "maxpool(2,stride=2) conv(64,5,stride=1,pad=2) maxpool(2,stride=2) "
                       "flatten linear(64) linear(10)");
    ROUND_TRIP("seed-relu", NULL);
    ROUND_TRIP("conv(32,5,pad=2) mp(2) relu flatten fc(10)",
               "conv(32,5,stride=1,pad=2) maxpool(2,stride=2) relu flatten linear(10)");
    ROUND_TRIP("conv(8,3,2,bias=0) maxpool(3,1,1) linear(4,bias=0) linear(4,bias=1)",
               "conv(8,3,stride=2,pad=0,bias=0) maxpool(3,stride=1,pad=1) linear(4,bias=0) "
               "linear(4)");
    ROUND_TRIP("2*(conv(16,3,pad=1) relu) maxpool(2)", NULL);
    ROUND_TRIP("ap(3,2,1) AvgPool2d(2) avgpool(3,stride=1) globalavgpool globalmaxpool() flatten",
               "avgpool(3,stride=2,pad=1) avgpool(2,stride=2) avgpool(3,stride=1) globalavgpool "
               "globalmaxpool flatten");
    ROUND_TRIP("dropout gelu scale(0.125) dropout(0.1) scale(-2) scale(1e-7)",
               "dropout(0.5) gelu scale(0.125) dropout(0.1) scale(-2) scale(1e-07)");
    ROUND_TRIP("res(relu 2*(res(gelu))) Residual( relu )",
               "res(relu res(gelu) res(gelu)) res(relu)");
    ROUND_TRIP("2*(res(conv(8,3,pad=1) relu)) flatten linear(10)",
               "res(conv(8,3,stride=1,pad=1) relu) res(conv(8,3,stride=1,pad=1) relu) flatten "
               "linear(10)");

    /* snprintf contract: the length needed comes back whatever the buffer; it stays
     * NUL-terminated; NULL with size 0 is allowed. */
    static const clcnn_layer_desc two[] = {L(LIN, 10, 0, 0, 0, 1, 1), L(RELU, 0, 0, 0, 0, 0, 12)};
    char small[8];
    memset(small, 'x', sizeof small);
    CHECK(clcnn_spec_format(two, 2, NULL, 0) == strlen("linear(10) relu"));
    CHECK(clcnn_spec_format(two, 2, small, sizeof small) == strlen("linear(10) relu"));
    CHECK(strcmp(small, "linear(") == 0);
    CHECK(clcnn_spec_format(two, 0, small, sizeof small) == 0 && small[0] == '\0');
    CHECK(clcnn_spec_format(NULL, 3, small, sizeof small) == 0 && small[0] == '\0');

    CHECK(strcmp(clcnn_layer_kind_name(CLCNN_LAYER_CONV2D), "Conv2d") == 0);
    CHECK(strcmp(clcnn_layer_kind_name(CLCNN_LAYER_MAXPOOL2D), "MaxPool2d") == 0);
    CHECK(strcmp(clcnn_layer_kind_name(CLCNN_LAYER_RELU), "ReLU") == 0);
    CHECK(strcmp(clcnn_layer_kind_name(CLCNN_LAYER_FLATTEN), "Flatten") == 0);
    CHECK(strcmp(clcnn_layer_kind_name(CLCNN_LAYER_LINEAR), "Linear") == 0);
    CHECK(strcmp(clcnn_layer_kind_name((clcnn_layer_kind)42), "Unknown") == 0);
}

/* A real-number argument of d by name; 0 when its kind has none. */
static double real_arg(const clcnn_layer_desc *d, const char *name) {
    double v = clcnn_spec_arg(d, name);
    return v == v ? v : 0.0;
}

/* The real-number arguments of the one layer spec parses to: factor, eps, momentum and p (0 for
 * those its kind does not take). */
static void expect_reals(int line, const char *spec, double factor, double eps, double momentum,
                         double p) {
    clcnn_layer_desc *l = NULL;
    clcnn_error e = {0};
    int n = 0;
    if (clcnn_spec_parse(spec, &l, &n, &e) != CLCNN_SUCCESS || n != 1) {
        fprintf(stderr, "%s:%d: \"%s\" failed: %s\n", __FILE__, line, spec, e.msg);
        test_failures++;
    } else if (real_arg(l, "factor") != factor || real_arg(l, "eps") != eps ||
               real_arg(l, "momentum") != momentum || real_arg(l, "p") != p) {
        fprintf(stderr, "%s:%d: \"%s\" gave factor %.17g eps %.17g momentum %.17g p %.17g\n",
                __FILE__, line, spec, real_arg(l, "factor"), real_arg(l, "eps"),
                real_arg(l, "momentum"), real_arg(l, "p"));
        test_failures++;
    }
    free(l);
}
#define REALS(spec, factor, eps, momentum, p) expect_reals(__LINE__, spec, factor, eps, momentum, p)

/* Real numbers: any length of decimal text, and the edges of float's range. */
static void test_reals(void) {
    /* 62 characters, and one of 2000: strtod reads the whole token */
    REALS("scale(0.12500000000000000000000000000000000000000000000000000000000)", 0.125, 0, 0, 0);
    char long_real[2100] = "scale(-0.";
    for (int i = 0; i < 2000; i++)
        strcat(long_real, "0");
    strcat(long_real, "25e2000)");
    REALS(long_real, -0.25, 0, 0, 0);
    /* the bounds the messages print are themselves accepted: values that round to FLT_MAX or
     * FLT_MIN as floats */
    REALS("scale(3.4028234e38)", 3.4028234e38, 0, 0, 0);
    REALS("scale(3.40282347e+38)", 3.40282347e+38, 0, 0, 0);
    REALS("scale(-3.4028235e38)", -3.4028235e38, 0, 0, 0);
    REALS("bn(eps=1.17549435e-38)", 0, 1.17549435e-38, 0.1, 0);
    REALS("scale(-1.1754944e-38)", -1.1754944e-38, 0, 0, 0);
    REALS("scale(0)", 0, 0, 0, 0);
    REALS("scale(-0.0e-999)", 0, 0, 0, 0); /* exactly 0 however it is written */
    REALS("bn(eps=1.1754944e-38,momentum=0)", 0, 1.1754944e-38, 0, 0);
    REALS("bn(eps=3e38,momentum=1)", 0, 3e38, 1, 0);
    REALS("dropout(0.000000000000000000000000000000000000011754944)", 0, 0, 0, 1.1754944e-38);
}

/* A bad spec and a piece its message must contain (always with the column). */
typedef struct bad_spec {
    const char *spec;
    const char *want;
} bad_spec;

static const bad_spec bad_specs[] = {
    {"", "column 1: empty spec"},
    {"relu add(@x)", "column 11: no value is labelled 'x' here"},
    {"relu add(x)", "column 10: add expects values such as @x, got 'x'"},
    {"relu add", "column 6: add needs the values it reads, as in add(@x)"},
    {"x: relu y: relu mul(@x, @input)", "column 17: mul reads 2 values, got 3"},
    {"x: relu add(@x)", "column 9: add reads at least 2 values, got 1"},
    {"x: add(@x)", "column 9: no value is labelled 'x' here"},
    {"x: y: relu", "column 4: one label a layer: 'x' names the next one already"},
    {"conv(8,3) x: @input relu", "column 11: a label names the layer after it, not a reference"},
    {"input: relu", "column 1: 'input' is the model's input and cannot be redefined"},
    {"1x: relu", "column 1: a label is letters, digits and '_' and starts with a letter"},
    {"relu @input", "column 6: a layer must follow a value reference (@x)"},
    {"relu @input x:", "column 13: a label names the layer after it: none follows"},
    {"res(relu x:)", "column 10: a label names the layer after it: none follows"},
    {"relu | relu", "column 6: unexpected '|' outside a res block"},
    {"res(relu | relu | relu)", "column 17: unexpected '|' (a res block has one"},
    {"res(| relu)", "column 4: empty res block"},
    {"res(relu |)", "column 4: empty shortcut of the res block"},
    {"a..b=relu", "column 1: a module name is parts of letters, digits and '_' joined by '.'"},
    {".a=relu", "column 1: a module name is parts"},
    {"a.=relu", "column 1: a module name is parts"},
    {"a-b=relu", "column 1: a module name is parts"},
    {"a= relu", "column 3: expected a layer after the module name, got ' '"},
    {"a=2*(relu)", "column 3: expected a layer after the module name, got '2'"},
    {"2*(x:)", "column 3: empty repetition group"},
    {"2*(@input)", "column 3: empty repetition group"},
    {"aaaaaaaaaaaaaaaaaaaaaaaaa: relu", "column 1: label 'aaaaaaaaaaaaaaaaaaaaaaaa...' is longer "
                                        "than 23 bytes"},
    {" \t\n ", "column 1: empty spec"},
    {"conv(32,5) softmax", "column 12: unknown layer 'softmax' (expected conv, maxpool"},
    {"conv-2d(8,3)", "column 1: unknown layer 'conv-2d'"},
    {"seed relu", "column 1: unknown layer 'seed' (a preset name must be the whole spec)"},
    {"conv(32,5", "column 10: missing ')' to close the arguments of conv opened at column 5"},
    {"2*(relu flatten", "column 16: missing ')' to close the group opened at column 3"},
    {"relu)", "column 5: unexpected ')' with no group open"},
    {"2*(relu)) relu", "column 9: unexpected ')'"},
    {"conv(32)", "column 1: conv needs at least 2 positional arguments (out, kernel), got 1"},
    {"conv", "column 1: conv needs at least 2 positional arguments (out, kernel), got 0"},
    {"relu linear", "column 6: linear needs 1 positional argument (out), got 0"},
    {"maxpool()", "column 1: maxpool needs at least 1 positional argument (kernel), got 0"},
    {"conv(32,5,pad=x)", "column 15: pad expects a non-negative integer, got 'x'"},
    {"conv(32,5,-1)", "column 11: stride expects a non-negative integer, got '-1'"},
    {"linear(1.5)", "column 8: out expects a non-negative integer, got '1.5'"},
    {"linear(10x)", "column 8: out expects a non-negative integer, got '10x'"},
    {"conv(32,5,pad=)", "column 15: pad expects a non-negative integer, got ')'"},
    {"linear(0)", "column 8: out must be in 1..65536, got 0"},
    {"conv(0,3)", "column 6: out must be in 1..65536, got 0"},
    {"conv(8,0)", "column 8: kernel must be in 1..64, got 0"},
    {"maxpool(0)", "column 9: kernel must be in 1..64, got 0"},
    {"conv(8,3,0)", "column 10: stride must be in 1..64, got 0"},
    {"maxpool(2,stride=0)", "column 18: stride must be in 1..64, got 0"},
    {"linear(65537)", "column 8: out '65537' is too large (at most 65536)"},
    {"conv(8,65)", "column 8: kernel '65' is too large (at most 64)"},
    {"conv(8,3,pad=65)", "column 14: pad '65' is too large (at most 64)"},
    {"linear(99999999999999999999)",
     "column 8: out '99999999999999999999' is too large (at most 65536)"},
    {"linear(999999999999999999999999999999)", "column 8: out '999999999999999999999999...' is "
                                               "too large"},
    {"linear(10,bias=2)", "column 16: bias expects 0 or 1, got '2'"},
    {"linear(10,bias=yes)", "column 16: bias expects 0 or 1, got 'yes'"},
    {"conv(8,3,bias= )", "column 16: bias expects 0 or 1, got ')'"},
    {"conv(8,3,dilation=2)", "column 10: conv has no keyword 'dilation' (it takes stride, pad, "
                             "padding, bias)"},
    {"maxpool(2,bias=0)", "column 11: maxpool has no keyword 'bias' (it takes stride, pad, "
                          "padding)"},
    {"linear(10,stride=1)", "column 11: linear has no keyword 'stride' (it takes bias)"},
    {"conv(8,3,pad=1,pad=2)", "column 16: pad given twice"},
    /* real-number arguments and groups */
    {"dropout(1.5)", "column 9: p must be in [0, 1], got '1.5'"},
    {"dropout(-0.1)", "column 9: p must be in [0, 1], got '-0.1'"},
    {"dropout(x)", "column 9: p expects a number, got 'x'"},
    {"dropout(0x1p-2)", "column 9: p expects a number, got '0x1p-2'"},
    {"dropout(nan)", "column 9: p expects a number, got 'nan'"},
    {"scale(1e999)", "column 7: factor must be a finite number, got '1e999'"},
    {"scale", "column 1: scale needs 1 positional argument (factor), got 0"},
    {"scale(1..2)", "column 7: factor expects a number, got '1..2'"},
    /* reals reach the kernels as floats: out of float's range, or a non-zero value that would
     * become 0 or a subnormal, is refused whatever the argument's own rule allows */
    {"scale(1e300)", "column 7: scale factor '1e300' is too large for float (the largest "
                     "magnitude is 3.40282347e+38)"},
    {"mul(-3.5e38)", "column 5: scale factor '-3.5e38' is too large for float"},
    {"scale(111111111111111111111111111111111111111111111111111111111111)",
     "column 7: scale factor '111111111111111111111111...' is too large for float"},
    {"scale(1e-300)", "column 7: scale factor '1e-300' is too small for float (a non-zero "
                      "magnitude must be at least 1.17549435e-38, the smallest normal float)"},
    {"bn(eps=1e-300)", "column 8: bn eps '1e-300' is too small for float"},
    {"scale(3.4028236e38)", "column 7: scale factor '3.4028236e38' is too large for float"},
    {"bn(eps=1.1754942e-38)", "column 8: bn eps '1.1754942e-38' is too small for float"},
    {"bn(eps=1e-40)", "column 8: bn eps '1e-40' is too small for float"},
    {"bn(eps=1e39)", "column 8: bn eps '1e39' is too large for float"},
    {"bn(momentum=1e-39)", "column 13: bn momentum '1e-39' is too small for float"},
    {"dropout(p=1e-45)", "column 11: dropout p '1e-45' is too small for float"},
    {"scale(2,p=1)", "column 9: scale takes no keyword arguments, got 'p'"},
    {"res", "column 4: expected '(' after res (a residual block is res( layers )), got end of "
            "spec"},
    {"res()", "column 4: empty res block"},
    {"res(relu", "column 9: missing ')' to close the group opened at column 4"},
    {"res(relu flatten) res(3)", "column 24: expected '*' after the repeat count"},
    {"conv(8,3,pad=1,padding=1)", "column 16: pad given twice"},
    {"conv(8,3,2,stride=2)", "column 12: stride given both positionally and by keyword"},
    {"conv(8,stride=2,3)", "column 17: positional argument after keyword arguments"},
    {"conv(8,3,1,1,1)", "column 14: conv takes at most 4 positional arguments (out, kernel, "
                        "stride, pad)"},
    {"linear(10,3)", "column 11: linear takes at most 1 positional argument (out)"},
    {"maxpool(3,2,2)", "column 13: maxpool pad 2 is more than half the kernel 3"},
    {"maxpool(2,pad=2)", "column 15: maxpool pad 2 is more than half the kernel 2"},
    {"avgpool(0)", "column 9: kernel must be in 1..64, got 0"},
    {"avgpool(3,pad=2)", "column 15: avgpool pad 2 is more than half the kernel 3 (PyTorch "
                         "requires pad <= kernel/2)"},
    {"avgpool()", "column 1: avgpool needs at least 1 positional argument (kernel), got 0"},
    {"avgpool(2,bias=0)", "column 11: avgpool has no keyword 'bias' (it takes stride, pad, "
                          "padding)"},
    {"globalavgpool(2)", "column 15: globalavgpool takes no arguments"},
    {"globalmaxpool(1)", "column 15: globalmaxpool takes no arguments"},
    {"0*(relu)", "column 1: repeat count must be in 1..64, got 0"},
    {"65*(relu)", "column 1: repeat count '65' is too large (at most 64)"},
    {"99999999999999999999*(relu)", "column 1: repeat count '99999999999999999999' is too large"},
    {"3*relu", "column 3: expected '(' after '*'"},
    {"3 relu", "column 3: expected '*' after the repeat count"},
    {"3", "column 2: expected '*' after the repeat count (a repetition is N*( layers )), got end "
          "of spec"},
    {"2*()", "column 3: empty repetition group"},
    {"1*(1*(1*(1*(1*(1*(1*(1*(1*(relu)))))))))", "column 27: groups nest deeper "
                                                 "than 8"},
    {"4*(64*(relu)) relu", "column 15: more than 256 layers"},
    {"relu 4*(64*(relu))", "column 6: more than 256 layers after expanding repetitions"},
    {"64*(64*(64*(64*(64*(64*(64*(64*(relu))))))))", "more than 256 layers after expanding"},
    {"linear(10)x", "column 11: expected ',' or whitespace between layers, got 'x'"},
    {"2*(relu)relu", "column 9: expected ',' or whitespace between layers, got 'r'"},
    {"relu(3)", "column 6: relu takes no arguments"},
    {"flatten(x)", "column 9: flatten takes no arguments"},
    {"relu,,relu", "column 6: expected a layer name, got ','"},
    {",relu", "column 1: expected a layer name, got ','"},
    {"relu,", "column 5: expected a layer after ','"},
    {"2*(relu,)", "column 8: expected a layer after ','"},
    {"(relu)", "column 1: expected a layer name, got '('"},
    {"conv(32 5)", "column 9: expected ',' or ')' in the arguments of conv, got '5'"},
    {"conv(32,,5)", "column 9: expected an argument, got ','"},
    {"conv(32,5,=1)", "column 11: expected a keyword name before '='"},
    {"conv(32,\x01)", "column 9: kernel expects a non-negative integer, got '?'"},
    {"relu\xff", "column 1: unknown layer 'relu?'"},
};

static void test_bad_specs(void) {
    int nbad = (int)(sizeof bad_specs / sizeof bad_specs[0]);
    for (int i = 0; i < nbad; i++) {
        clcnn_layer_desc *l = (clcnn_layer_desc *)&l; /* must come back NULL */
        clcnn_error e = {0};
        int n = -1;
        clcnn_status st = clcnn_spec_parse(bad_specs[i].spec, &l, &n, &e);
        CHECK_MSG(st == CLCNN_ERR_SPEC && l == NULL && n == 0, "\"%s\": status %s, n %d",
                  bad_specs[i].spec, clcnn_status_str(st), n);
        CHECK_MSG(strncmp(e.msg, "model spec, column ", 19) == 0 &&
                      strstr(e.msg, bad_specs[i].want) != NULL && !strchr(e.msg, '\n'),
                  "\"%s\": message \"%s\" lacks \"%s\"", bad_specs[i].spec, e.msg,
                  bad_specs[i].want);
        if (st == CLCNN_SUCCESS) free(l);
    }
    /* The message quotes the spec. */
    clcnn_layer_desc *l = NULL;
    clcnn_error e = {0};
    int n = 0;
    CHECK(clcnn_spec_parse("conv(32,5,pad=x)", &l, &n, &e) == CLCNN_ERR_SPEC);
    CHECK_MSG(strcmp(e.msg, "model spec, column 15: pad expects a non-negative integer, got 'x' "
                            "(in \"conv(32,5,pad=x)\")") == 0,
              "%s", e.msg);
    /* A long spec is quoted as a window that still contains the culprit. */
    char long_spec[2000] = "";
    for (int i = 0; i < 300; i++)
        strcat(long_spec, "relu ");
    CHECK(clcnn_spec_parse(long_spec, &l, &n, &e) == CLCNN_ERR_SPEC);
    CHECK_MSG(strstr(e.msg, "column 1281: more than 256 layers") && strlen(e.msg) < 400, "%s",
              e.msg);
    memset(long_spec, 'a', sizeof long_spec - 1);
    long_spec[sizeof long_spec - 1] = '\0';
    CHECK(clcnn_spec_parse(long_spec, &l, &n, &e) == CLCNN_ERR_SPEC);
    CHECK_MSG(strstr(e.msg, "column 1: unknown layer 'aaaaaaaaaaaaaaaaaaaaaaaa...'"), "%s", e.msg);
    /* Too long altogether. */
    size_t huge = CLCNN_SPEC_MAX_LEN + 10;
    char *big = malloc(huge + 1);
    CHECK(big != NULL);
    if (big) {
        memset(big, ' ', huge);
        memcpy(big, "relu", 4);
        big[huge] = '\0';
        CHECK(clcnn_spec_parse(big, &l, &n, &e) == CLCNN_ERR_SPEC);
        CHECK_MSG(strstr(e.msg, "column 65537: longer than 65536 bytes"), "%s", e.msg);
        free(big);
    }
    /* Programmer errors. */
    CHECK(clcnn_spec_parse(NULL, &l, &n, &e) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(clcnn_spec_parse("relu", NULL, &n, &e) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(clcnn_spec_parse("relu", &l, NULL, NULL) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(clcnn_spec_parse("relu(", &l, &n, NULL) == CLCNN_ERR_SPEC); /* e is optional */
}

/* xorshift32: a fixed seed makes any failure reproducible. */
static unsigned rng_state = 0x9e3779b9u;
static unsigned rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

/* Random byte strings and mutations of valid specs: no crash (ASan/UBSan watch), and every
 * result is either a list within the limits that round-trips, or a one-line SPEC error. */
static void test_fuzz(void) {
    static const char *seeds[] = {"seed-relu",
                                  "3*(conv(32,5,pad=2) relu maxpool(2)) flatten fc(10)",
                                  "2*(relu 3*(flatten)) conv(8,3,stride=2,padding=1,bias=0)",
                                  "4*(64*(relu))",
                                  "maxpool(3,2,1), linear(65536,bias=1)",
                                  "x: a=conv(8,3) y: relu @x cat(@y, @x) 2*(z: relu add(@z))",
                                  "s: res(conv(8,1) | b.c=bn) x: relu mul(@s)",
                                  "resnet18"};
    static const char alphabet[] = "0123456789(),*= \t=conv relu maxpool linear flatten pad "
                                   "stride bias padding fc mp x-\n\xff@:|.x: @x add cat mul res";
    char spec[2048];
    char text[8192];
    int nseeds = (int)(sizeof seeds / sizeof seeds[0]), ok = 0;
    for (int iter = 0; iter < 30000; iter++) {
        size_t len;
        if (iter % 3 == 0) {
            len = rng() % 64;
            for (size_t k = 0; k < len; k++)
                spec[k] = (char)(iter % 2 ? alphabet[rng() % (sizeof alphabet - 1)]
                                          : (char)(1 + rng() % 255));
            spec[len] = '\0';
        } else {
            const char *s = seeds[rng() % nseeds];
            if (s == seeds[0] || !strcmp(s, "resnet18")) s = clcnn_spec_preset(s);
            strcpy(spec, s);
            len = strlen(spec);
            for (int m = 0; m < 1 + (int)(rng() % 2); m++) {
                size_t at = len ? rng() % len : 0;
                switch (rng() % 3) {
                case 0: /* replace */
                    if (len) spec[at] = alphabet[rng() % (sizeof alphabet - 1)];
                    break;
                case 1: /* delete */
                    if (len) memmove(spec + at, spec + at + 1, len - at), len--;
                    break;
                default: /* insert */
                    if (len + 1 < sizeof spec) {
                        memmove(spec + at + 1, spec + at, len - at + 1);
                        spec[at] = alphabet[rng() % (sizeof alphabet - 1)];
                        len++;
                    }
                }
            }
        }
        clcnn_layer_desc *l = NULL, *l2 = NULL;
        clcnn_error e = {0};
        int n = 0, n2 = 0;
        clcnn_status st = clcnn_spec_parse(spec, &l, &n, &e);
        if (st == CLCNN_SUCCESS) {
            ok++;
            CHECK_MSG(n >= 1 && n <= CLCNN_SPEC_MAX_LAYERS, "\"%s\": %d layers", spec, n);
            size_t need = clcnn_spec_format(l, n, text, sizeof text);
            CHECK_MSG(need < sizeof text && clcnn_spec_parse(text, &l2, &n2, &e) == 0 && n2 == n,
                      "\"%s\" -> \"%s\" does not parse back", spec, text);
            for (int i = 0; l2 && i < n && i < n2; i++)
                CHECK_MSG(same_layer(&l[i], &l2[i], 0), "\"%s\" layer %d", spec, i);
        } else {
            CHECK_MSG(st == CLCNN_ERR_SPEC && strncmp(e.msg, "model spec, column ", 19) == 0 &&
                          !strchr(e.msg, '\n'),
                      "\"%s\": %s %s", spec, clcnn_status_str(st), e.msg);
        }
        free(l);
        free(l2);
    }
    CHECK_MSG(ok > 1000, "only %d fuzz inputs parsed: the mutations are too destructive", ok);
}

int main(void) {
    test_presets();
    test_names_and_args();
    test_repetition();
    test_separators();
    test_graph();
    test_format();
    test_reals();
    test_bad_specs();
    test_fuzz();
    return test_finish("test_spec");
}
