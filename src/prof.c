/* The profiler object (prof.h): events, their labels and each section's floating-point work. */
#include "prof.h"

#include <stdlib.h>
#include <string.h>

enum { MAX_STRINGS = 512, MAX_FLOP = 64 };
/* Launches shorter than this are counted apart in the report: on PoCL a launch costs 27-57 us
 * of its own, so work this small is worth fusing into a neighbour. */
#define SHORT_MS 0.020

struct clcnn_prof {
    int by_kernel; /* one row per (section, kernel) */
    cl_event *events;
    const char **names;
    int n, cap;
    const char *label; /* the open section, one of strings[] */
    /* Section labels are copied here, so a report stays valid after the model that named the
     * sections is freed; interned for the profiler's lifetime. */
    char strings[MAX_STRINGS][64];
    int nstrings;
    const char *flop_names[MAX_FLOP]; /* floating-point work recorded per section */
    double flops[MAX_FLOP];
    int nflop;
};

clcnn_prof *clcnn_prof_create(int by_kernel) {
    clcnn_prof *p = calloc(1, sizeof *p);
    if (p) p->by_kernel = by_kernel;
    return p;
}

/* Releases the recorded events and forgets the sections' work. */
static void clear(clcnn_prof *p) {
    for (int i = 0; i < p->n; i++)
        if (p->events[i]) clReleaseEvent(p->events[i]);
    p->n = 0;
    p->nflop = 0;
}

void clcnn_prof_free(clcnn_prof *p) {
    if (!p) return;
    clear(p);
    free(p->events);
    free(p->names);
    free(p);
}

/* The profiler's own copy of a label (the last slot collects any overflow). */
static const char *intern(clcnn_prof *p, const char *label) {
    for (int i = 0; i < p->nstrings; i++)
        if (!strcmp(p->strings[i], label)) return p->strings[i];
    if (p->nstrings == MAX_STRINGS) return p->strings[MAX_STRINGS - 1];
    char *dst = p->strings[p->nstrings++];
    snprintf(dst, sizeof p->strings[0], "%s",
             p->nstrings == MAX_STRINGS ? "other sections" : label);
    return dst;
}

void clcnn_prof_begin(clcnn_prof *p, const char *label, double flops) {
    p->label = label = label ? intern(p, label) : NULL;
    if (!label || flops <= 0) return;
    int k = 0;
    while (k < p->nflop && strcmp(p->flop_names[k], label) != 0)
        k++;
    if (k == p->nflop) {
        if (k == MAX_FLOP) return;
        p->flop_names[k] = label, p->flops[k] = 0, p->nflop++;
    }
    p->flops[k] += flops;
}

cl_event *clcnn_prof_event(clcnn_prof *p, const char *name) {
    if (p->label && p->by_kernel) {
        char both[64];
        snprintf(both, sizeof both, "%.24s: %s", p->label, name);
        name = intern(p, both);
    } else if (p->label) {
        name = p->label;
    }
    if (p->n == p->cap) {
        int cap = p->cap ? p->cap * 2 : 256;
        cl_event *ev = realloc(p->events, (size_t)cap * sizeof *ev);
        if (ev) p->events = ev;
        const char **nm = realloc(p->names, (size_t)cap * sizeof *nm);
        if (nm) p->names = nm;
        if (!ev || !nm) return NULL;
        p->cap = cap;
    }
    p->names[p->n] = name;
    return &p->events[p->n++];
}

size_t clcnn_prof_report(clcnn_prof *p, char *buf, size_t size) {
    enum { MAXK = MAX_STRINGS };
    const char *names[MAXK];
    double ms[MAXK], total = 0, short_ms = 0;
    int calls[MAXK], nk = 0, launches = 0, short_n = 0;
    size_t used = 0;
    for (int i = 0; i < p->n; i++) {
        cl_ulong t0 = 0, t1 = 0;
        if (!p->events[i]) continue;
        clGetEventProfilingInfo(p->events[i], CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL);
        clGetEventProfilingInfo(p->events[i], CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
        int k = 0;
        while (k < nk && strcmp(names[k], p->names[i]) != 0)
            k++;
        if (k == nk) {
            if (nk == MAXK) continue;
            names[nk] = p->names[i], ms[nk] = 0, calls[nk] = 0, nk++;
        }
        double d = (double)(t1 - t0) * 1e-6;
        ms[k] += d, calls[k]++, total += d, launches++;
        if (d < SHORT_MS) short_ms += d, short_n++;
    }
    for (int k = 0; k < nk; k++) {
        double flops = 0;
        char rate[32] = "";
        for (int f = 0; f < p->nflop; f++)
            if (!strcmp(p->flop_names[f], names[k])) flops = p->flops[f];
        if (flops > 0 && ms[k] > 0)
            snprintf(rate, sizeof rate, "%8.1f GFLOP/s", flops / ms[k] * 1e-6);
        int n = snprintf(used < size ? buf + used : NULL, used < size ? size - used : 0,
                         "%-*s %6d launches %10.3f ms %5.1f%% %s\n", p->by_kernel ? 48 : 26,
                         names[k], calls[k], ms[k], total > 0 ? 100.0 * ms[k] / total : 0.0, rate);
        if (n > 0) used += (size_t)n;
    }
    int n = snprintf(used < size ? buf + used : NULL, used < size ? size - used : 0,
                     "all: %d launches, %.3f ms; %d launches under %.0f us, %.3f ms\n", launches,
                     total, short_n, SHORT_MS * 1e3, short_ms);
    if (n > 0) used += (size_t)n;
    clear(p);
    return used;
}
