{#
  statespace.cpp -- the host enumerator of the CME backend: the states reachable from
  the initial state under per-species bounds, in depth-first order. Generated per
  model only through the propensity function it includes (`function`: model.py's
  propensity_function(), i.e. propensities.cuh rendered); the search itself is
  generic, with the stoichiometry and bounds passed at run time. Built with
  sbmlgpu.runtime.host.load and called through ctypes by statespace.py.

  The search (iterative, a stack of (state, next reaction to try)):
    - a state is given the next index when it is first seen (discovery), and is then
      explored at once, so a reversible pair's two states get neighbouring indices
      and the matrix's {-1, 0, +1} bands fill up (Maggioni et al. 2013);
    - at discovery its R propensities are computed once; reaction r is an edge when
      its propensity is > 0 and its jump is not zero; a jump past a bound is dropped
      and marks the state a boundary state (finite state projection); a jump to a
      negative count with a positive propensity is an error (the law is wrong for a
      jump process), as is a negative or non-finite propensity;
    - lookup of a state: a direct index over the box prod(bound + 1) (calloc'd, so
      only touched pages cost memory) when Python says it fits, else an
      open-addressing hash table (linear probing, grown at half load) over the
      states found so far.
  Outputs stay in C++ memory (state-major, cache-friendly while searching) until
  cme_copy writes them species/reaction-major into numpy's buffers.
#}
{{ function }}

#include <stdlib.h>
#include <string.h>

/* info[0] (statespace.py reads these) */
#define CME_OK 0
#define CME_TOO_MANY 1           /* info[1] states found when max_states was reached */
#define CME_NEGATIVE_COUNT 2     /* info[2] reaction, info[3] state, info[4..] its counts */
#define CME_NEGATIVE_PROPENSITY 3
#define CME_NOT_FINITE 4
#define CME_NO_MEMORY 5
#define CME_INFO_STATE 4         /* where the offending state's counts start in info */

/* targets entry while searching: an edge whose target is not looked up yet */
#define CME_PENDING (-2)

typedef struct {
    int64_t n, cap;         /* states found; room for */
    int32_t* states;        /* n x CME_S, state-major */
    int32_t* targets;       /* n x CME_R */
    uint8_t* boundary;      /* n */
    int direct;             /* lookup: 1 direct index over the box, 0 hash table */
    uint32_t* table;        /* index + 1 per box cell or hash slot (0: empty) */
    int64_t table_size;     /* box cells, or hash slots (a power of two) */
    int64_t stride[CME_S + 1];
} cme_space;

typedef struct { int32_t state, next; } cme_frame;

static void cme_push(cme_frame* stack, int64_t* depth, int64_t state)
{
    stack[*depth].state = (int32_t)state;
    stack[*depth].next = 0;
    ++*depth;
}

static uint64_t cme_hash(const int32_t* x)
{
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (int k = 0; k < CME_S; ++k) {
        h ^= (uint32_t)x[k];
        h *= 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
    }
    return h ^ (h >> 29);
}

static int cme_same(const int32_t* a, const int32_t* b)
{
    for (int k = 0; k < CME_S; ++k)
        if (a[k] != b[k])
            return 0;
    return 1;
}

/* The index of state x (or -1) and the table slot that holds it or would. */
static int64_t cme_find(const cme_space* s, const int32_t* x, int64_t* slot)
{
    if (s->direct) {
        int64_t cell = 0;
        for (int k = 0; k < CME_S; ++k)
            cell += (int64_t)x[k] * s->stride[k];
        *slot = cell;
        return (int64_t)s->table[cell] - 1;
    }
    const uint64_t mask = (uint64_t)s->table_size - 1;
    for (uint64_t h = cme_hash(x) & mask;; h = (h + 1) & mask) {
        const uint32_t v = s->table[h];
        if (v == 0 || cme_same(s->states + (int64_t)(v - 1) * CME_S, x)) {
            *slot = (int64_t)h;
            return (int64_t)v - 1;
        }
    }
}

static int cme_rehash(cme_space* s, int64_t size)
{
    uint32_t* table = (uint32_t*)calloc((size_t)size, sizeof(uint32_t));
    if (!table)
        return 0;
    free(s->table);
    s->table = table;
    s->table_size = size;
    for (int64_t i = 0; i < s->n; ++i) {
        int64_t slot;
        cme_find(s, s->states + i * CME_S, &slot);
        s->table[slot] = (uint32_t)(i + 1);
    }
    return 1;
}

static int cme_grow(cme_space* s, int64_t cap)
{
    /* realloc of a large block moves pages (mremap), it does not copy them */
    int32_t* states = (int32_t*)realloc(s->states, (size_t)(cap * CME_S + 1) * sizeof(int32_t));
    if (states)
        s->states = states;
    int32_t* targets = (int32_t*)realloc(s->targets, (size_t)(cap * CME_R + 1) * sizeof(int32_t));
    if (targets)
        s->targets = targets;
    uint8_t* boundary = (uint8_t*)realloc(s->boundary, (size_t)cap + 1);
    if (boundary)
        s->boundary = boundary;
    if (!states || !targets || !boundary)
        return 0;
    s->cap = cap;
    return 1;
}

static void cme_fail(int64_t* info, int status, int r, int64_t state, const int32_t* x)
{
    info[0] = status;
    info[2] = r;
    info[3] = state;
    for (int k = 0; k < CME_S; ++k)
        info[CME_INFO_STATE + k] = x[k];
}

/* A new state: its index, then its propensities and the fate of each reaction. */
static int cme_discover(cme_space* s, const int32_t* x, int64_t slot, const int32_t* bounds,
                        const int32_t* delta, int64_t max_states, int64_t* info)
{
    if (s->n >= max_states) {
        info[0] = CME_TOO_MANY;
        return 0;
    }
    if (s->n == s->cap && !cme_grow(s, s->cap * 2)) {
        info[0] = CME_NO_MEMORY;
        return 0;
    }
    const int64_t i = s->n++;
    memcpy(s->states + i * CME_S, x, CME_S * sizeof(int32_t));
    s->table[slot] = (uint32_t)(i + 1);
    s->boundary[i] = 0;
    double a[CME_R + 1];
    cme_propensities(x, 1, a, 1);
    for (int r = 0; r < CME_R; ++r) {
        int32_t* target = s->targets + i * CME_R + r;
        const int32_t* d = delta + r * CME_S;
        *target = -1;
        if (!(a[r] - a[r] == 0.0)) {  /* NaN or infinite */
            cme_fail(info, CME_NOT_FINITE, r, i, x);
            return 0;
        }
        if (a[r] < 0.0) {
            cme_fail(info, CME_NEGATIVE_PROPENSITY, r, i, x);
            return 0;
        }
        int jumps = 0, negative = 0, beyond = 0;
        for (int k = 0; k < CME_S; ++k) {
            const int64_t y = (int64_t)x[k] + d[k];
            jumps |= d[k] != 0;
            negative |= y < 0;
            beyond |= y > bounds[k];
        }
        if (a[r] == 0.0 || !jumps)
            continue;
        if (negative) {
            cme_fail(info, CME_NEGATIVE_COUNT, r, i, x);
            return 0;
        }
        if (beyond)
            s->boundary[i] = 1;
        else
            *target = CME_PENDING;
    }
    if (!s->direct && 2 * s->n > s->table_size && !cme_rehash(s, 2 * s->table_size)) {
        info[0] = CME_NO_MEMORY;
        return 0;
    }
    return 1;
}

extern "C" void cme_free(void* handle)
{
    cme_space* s = (cme_space*)handle;
    if (!s)
        return;
    free(s->states);
    free(s->targets);
    free(s->boundary);
    free(s->table);
    free(s);
}

/* Enumerate from x0. delta: (R, S) net stoichiometry; bounds: (S,); direct: use the
   direct index over the box (statespace.py checks that it fits). info: (4 + S,)
   int64, info[0] the status, info[1] the states found. Returns the handle for
   cme_copy / cme_free, or NULL on any failure (info says which). */
extern "C" void* cme_enumerate(const int32_t* x0, const int32_t* bounds, const int32_t* delta,
                               int64_t max_states, int32_t direct, int64_t* info)
{
    memset(info, 0, (CME_INFO_STATE + CME_S) * sizeof(int64_t));
    cme_space* s = (cme_space*)calloc(1, sizeof(cme_space));
    cme_frame* stack = NULL;
    int64_t depth = 0, stack_cap = 1024;
    int ok = s != NULL;
    if (ok) {
        s->direct = direct;
        int64_t box = 1;
        for (int k = CME_S - 1; direct && k >= 0; --k) {  /* the last species varies fastest */
            s->stride[k] = box;
            box *= (int64_t)bounds[k] + 1;
        }
        s->table_size = direct ? box : 1024;
        s->table = (uint32_t*)calloc((size_t)s->table_size, sizeof(uint32_t));
        stack = (cme_frame*)malloc((size_t)stack_cap * sizeof(cme_frame));
        ok = s->table && stack && cme_grow(s, 1024);
    }
    if (!ok) {
        info[0] = CME_NO_MEMORY;
    } else {
        int64_t slot;
        cme_find(s, x0, &slot);
        ok = cme_discover(s, x0, slot, bounds, delta, max_states, info);
        if (ok)
            cme_push(stack, &depth, 0);
    }
    int32_t y[CME_S + 1];
    while (ok && depth > 0) {
        cme_frame* top = stack + depth - 1;
        const int64_t i = top->state;
        int r = top->next;
        while (r < CME_R && s->targets[i * CME_R + r] != CME_PENDING)
            ++r;
        if (r == CME_R) {
            --depth;
            continue;
        }
        top->next = r + 1;
        for (int k = 0; k < CME_S; ++k)
            y[k] = s->states[i * CME_S + k] + delta[r * CME_S + k];
        int64_t slot;
        int64_t j = cme_find(s, y, &slot);
        if (j < 0) {
            j = s->n;
            ok = cme_discover(s, y, slot, bounds, delta, max_states, info);
            if (!ok)
                break;
            if (depth == stack_cap) {
                cme_frame* grown = (cme_frame*)realloc(stack, (size_t)(2 * stack_cap) * sizeof(cme_frame));
                if (!grown) {
                    info[0] = CME_NO_MEMORY;
                    ok = 0;
                    break;
                }
                stack = grown;
                stack_cap *= 2;
            }
            cme_push(stack, &depth, j);
        }
        s->targets[i * CME_R + r] = (int32_t)j;
    }
    free(stack);
    info[1] = s ? s->n : 0;
    if (!ok) {
        cme_free(s);
        return NULL;
    }
    return s;
}

/* Write the enumerated space into numpy's buffers: states (S, n), sources and
   targets (R, n) (sources[r, targets[r, j]] = j), boundary (n,). */
extern "C" void cme_copy(void* handle, int32_t* states, int32_t* sources, int32_t* targets,
                         uint8_t* boundary)
{
    const cme_space* s = (const cme_space*)handle;
    const int64_t n = s->n;
    for (int64_t i = 0; i < n; ++i)
        for (int k = 0; k < CME_S; ++k)
            states[k * n + i] = s->states[i * CME_S + k];
    memset(sources, 0xff, (size_t)(n * CME_R) * sizeof(int32_t));  /* -1 */
    for (int64_t i = 0; i < n; ++i)
        for (int r = 0; r < CME_R; ++r) {
            const int32_t t = s->targets[i * CME_R + r];
            targets[r * n + i] = t;
            if (t >= 0)
                sources[r * n + t] = (int32_t)i;
        }
    memcpy(boundary, s->boundary, (size_t)n);
}

/* prop (R, n) from states (S, n): the host build of the GPU's propensity kernel. */
extern "C" void cme_propensities_host(const int32_t* states, int64_t n, double* prop,
                                      int32_t parallel)
{
#pragma omp parallel for if(parallel) schedule(static)
    for (int64_t i = 0; i < n; ++i)
        cme_propensities(states + i, (long)n, prop + i, (long)n);
}
