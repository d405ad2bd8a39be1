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
  Storage: blocks of CME_BLOCK states, state-major (a state's counts and its R
  targets are adjacent while searching), allocated as the search grows (no
  realloc copies); cme_copy writes them species/reaction-major into numpy's
  buffers and frees each block once copied, so the peak is about one copy of the
  outputs, not two.
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
#define CME_STOPPED 6            /* the caller set info[CME_INFO_STOP] (Ctrl-C while it ran) */
#define CME_INFO_STATE 4         /* where the offending state's counts start in info */
#define CME_INFO_STOP (CME_INFO_STATE + CME_S)  /* the caller's stop request (not cleared) */

/* targets entry while searching: an edge whose target is not looked up yet */
#define CME_PENDING (-2)

#define CME_BLOCK_BITS 16
#define CME_BLOCK ((int64_t)1 << CME_BLOCK_BITS)
#define CME_BLOCK_MASK (CME_BLOCK - 1)

typedef struct {
    int64_t n;              /* states found */
    int64_t blocks, block_room;  /* blocks allocated; room in the pointer arrays */
    int32_t** states;       /* per block: CME_BLOCK x CME_S */
    int32_t** targets;      /* per block: CME_BLOCK x CME_R */
    uint8_t** boundary;     /* per block: CME_BLOCK */
    int direct;             /* lookup: 1 direct index over the box, 0 hash table */
    uint32_t* table;        /* index + 1 per box cell or hash slot (0: empty) */
    int64_t table_size;     /* box cells, or hash slots (a power of two) */
    int64_t stride[CME_S + 1];
    /* the jumps, sparse: reaction r changes species jump_k[jump_at[r] ..
       jump_at[r + 1]) by jump_d[...] */
    int jump_at[CME_R + 1];
    int jump_k[CME_R * CME_S + 1], jump_d[CME_R * CME_S + 1];
} cme_space;

static inline int32_t* cme_state(const cme_space* s, int64_t i)
{
    return s->states[i >> CME_BLOCK_BITS] + (i & CME_BLOCK_MASK) * CME_S;
}

static inline int32_t* cme_targets(const cme_space* s, int64_t i)
{
    return s->targets[i >> CME_BLOCK_BITS] + (i & CME_BLOCK_MASK) * CME_R;
}

static inline uint8_t* cme_boundary(const cme_space* s, int64_t i)
{
    return s->boundary[i >> CME_BLOCK_BITS] + (i & CME_BLOCK_MASK);
}

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
        if (v == 0 || cme_same(cme_state(s, (int64_t)v - 1), x)) {
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
        cme_find(s, cme_state(s, i), &slot);
        s->table[slot] = (uint32_t)(i + 1);
    }
    return 1;
}

/* Room for one more block of states. */
static int cme_add_block(cme_space* s)
{
    if (s->blocks == s->block_room) {
        const int64_t room = 2 * s->block_room + 16;
        int32_t** states = (int32_t**)realloc(s->states, (size_t)room * sizeof(int32_t*));
        if (states)
            s->states = states;
        int32_t** targets = (int32_t**)realloc(s->targets, (size_t)room * sizeof(int32_t*));
        if (targets)
            s->targets = targets;
        uint8_t** boundary = (uint8_t**)realloc(s->boundary, (size_t)room * sizeof(uint8_t*));
        if (boundary)
            s->boundary = boundary;
        if (!states || !targets || !boundary)
            return 0;
        s->block_room = room;
    }
    const int64_t b = s->blocks;
    s->states[b] = (int32_t*)malloc((size_t)(CME_BLOCK * CME_S + 1) * sizeof(int32_t));
    s->targets[b] = (int32_t*)malloc((size_t)(CME_BLOCK * CME_R + 1) * sizeof(int32_t));
    s->boundary[b] = (uint8_t*)malloc((size_t)CME_BLOCK);
    s->blocks += 1;  /* counted even when one failed: cme_free frees what is there */
    return s->states[b] && s->targets[b] && s->boundary[b];
}

static void cme_free_block(cme_space* s, int64_t b)
{
    free(s->states[b]);
    free(s->targets[b]);
    free(s->boundary[b]);
    s->states[b] = NULL;
    s->targets[b] = NULL;
    s->boundary[b] = NULL;
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
                        int64_t max_states, int64_t* info)
{
    if (s->n >= max_states) {
        info[0] = CME_TOO_MANY;
        return 0;
    }
    if (s->n == s->blocks * CME_BLOCK && !cme_add_block(s)) {
        info[0] = CME_NO_MEMORY;
        return 0;
    }
    const int64_t i = s->n++;
    if ((s->n & 0xFFFF) == 0) {  /* the count so far, for statespace.py's progress line */
        ((volatile int64_t*)info)[1] = s->n;
        if (((volatile int64_t*)info)[CME_INFO_STOP]) {
            info[0] = CME_STOPPED;
            return 0;
        }
    }
    memcpy(cme_state(s, i), x, CME_S * sizeof(int32_t));
    s->table[slot] = (uint32_t)(i + 1);
    uint8_t* boundary = cme_boundary(s, i);
    int32_t* targets = cme_targets(s, i);
    *boundary = 0;
    double a[CME_R + 1];
    cme_propensities(x, 1, a, 1);
    for (int r = 0; r < CME_R; ++r) {
        targets[r] = -1;
        if (!(a[r] - a[r] == 0.0)) {  /* NaN or infinite */
            cme_fail(info, CME_NOT_FINITE, r, i, x);
            return 0;
        }
        if (a[r] < 0.0) {
            cme_fail(info, CME_NEGATIVE_PROPENSITY, r, i, x);
            return 0;
        }
        if (a[r] == 0.0 || s->jump_at[r] == s->jump_at[r + 1])  /* no rate, or no jump */
            continue;
        int negative = 0, beyond = 0;
        for (int e = s->jump_at[r]; e < s->jump_at[r + 1]; ++e) {
            const int k = s->jump_k[e];
            const int64_t y = (int64_t)x[k] + s->jump_d[e];
            negative |= y < 0;
            beyond |= y > bounds[k];
        }
        if (negative) {
            cme_fail(info, CME_NEGATIVE_COUNT, r, i, x);
            return 0;
        }
        if (beyond)
            *boundary = 1;
        else
            targets[r] = CME_PENDING;
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
    for (int64_t b = 0; b < s->blocks; ++b)
        cme_free_block(s, b);
    free(s->states);
    free(s->targets);
    free(s->boundary);
    free(s->table);
    free(s);
}

/* Enumerate from x0. delta: (R, S) net stoichiometry; bounds: (S,); direct: use the
   direct index over the box (statespace.py checks that it fits). info: (4 + S,)
   int64 (+ 1: info[4 + S], a stop request the search reads every 65,536 states),
   info[0] the status, info[1] the states found. Returns the handle for
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
        int e = 0;
        for (int r = 0; r < CME_R; ++r) {
            s->jump_at[r] = e;
            for (int k = 0; k < CME_S; ++k)
                if (delta[r * CME_S + k] != 0) {
                    s->jump_k[e] = k;
                    s->jump_d[e++] = delta[r * CME_S + k];
                }
        }
        s->jump_at[CME_R] = e;
        s->table_size = direct ? box : 1024;
        s->table = (uint32_t*)calloc((size_t)s->table_size, sizeof(uint32_t));
        stack = (cme_frame*)malloc((size_t)stack_cap * sizeof(cme_frame));
        ok = s->table && stack;
    }
    if (!ok) {
        info[0] = CME_NO_MEMORY;
    } else {
        int64_t slot;
        cme_find(s, x0, &slot);
        ok = cme_discover(s, x0, slot, bounds, max_states, info);
        if (ok)
            cme_push(stack, &depth, 0);
    }
    int32_t y[CME_S + 1];
    while (ok && depth > 0) {
        cme_frame* top = stack + depth - 1;
        const int64_t i = top->state;
        int32_t* targets = cme_targets(s, i);
        int r = top->next;
        while (r < CME_R && targets[r] != CME_PENDING)
            ++r;
        if (r == CME_R) {
            --depth;
            continue;
        }
        top->next = r + 1;
        memcpy(y, cme_state(s, i), CME_S * sizeof(int32_t));
        for (int e = s->jump_at[r]; e < s->jump_at[r + 1]; ++e)
            y[s->jump_k[e]] += s->jump_d[e];
        int64_t slot;
        int64_t j = cme_find(s, y, &slot);
        if (j < 0) {
            j = s->n;
            ok = cme_discover(s, y, slot, bounds, max_states, info);
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
        targets[r] = (int32_t)j;  /* blocks never move: the pointer is still good */
    }
    free(stack);
    info[1] = s ? s->n : 0;
    if (!ok) {
        cme_free(s);
        return NULL;
    }
    return s;
}

/* Write the enumerated space into numpy's buffers -- states (S, n), sources and
   targets (R, n) (sources[r, targets[r, j]] = j), boundary (n,) -- freeing each
   block once it is copied. The handle then holds no states: only cme_free. */
extern "C" void cme_copy(void* handle, int32_t* states, int32_t* sources, int32_t* targets,
                         uint8_t* boundary)
{
    cme_space* s = (cme_space*)handle;
    const int64_t n = s->n;
    memset(sources, 0xff, (size_t)(n * CME_R) * sizeof(int32_t));  /* -1 */
    for (int64_t b = 0; b < s->blocks; ++b) {
        const int64_t lo = b * CME_BLOCK, hi = lo + CME_BLOCK < n ? lo + CME_BLOCK : n;
        for (int64_t i = lo; i < hi; ++i) {
            const int32_t* x = cme_state(s, i);
            for (int k = 0; k < CME_S; ++k)
                states[k * n + i] = x[k];
            const int32_t* t = cme_targets(s, i);
            for (int r = 0; r < CME_R; ++r) {
                targets[r * n + i] = t[r];
                if (t[r] >= 0)
                    sources[r * n + t[r]] = (int32_t)i;
            }
        }
        if (hi > lo)
            memcpy(boundary + lo, cme_boundary(s, lo), (size_t)(hi - lo));
        cme_free_block(s, b);
    }
    s->n = 0;
}

/* prop (R, n) from states (S, n): the host build of the GPU's propensity kernel. */
extern "C" void cme_propensities_host(const int32_t* states, int64_t n, double* prop,
                                      int32_t parallel)
{
#pragma omp parallel for if(parallel) schedule(static)
    for (int64_t i = 0; i < n; ++i)
        cme_propensities(states + i, (long)n, prop + i, (long)n);
}
