{#
  persistent.cu -- the whole SIVIA on the device in one persistent kernel (Sharma's
  thesis): warps take boxes from a device queue, check them a few Taylor steps at a
  time, keep, drop or bisect them there, and push the halves back into the queue.
  Context: model.cuh's (the model's functions and sizes). GPU only: the host path
  keeps interval.cu's one-launch-per-batch loop.

  Data (one launch; plugins/interval/persistent.py owns the host side):
  - the queue: `capacity` boxes of the searched unknowns, queue_lo/queue_hi
    [slot * IV_NU + j], filled once per launch from slot 0 up (a linear array, not a
    ring: the host empties it between launches). ctl[IV_CTL_HEAD] is the next slot
    to read, ctl[IV_CTL_TAIL] the slots reserved for writing; ready[slot] turns 1 once
    the slot's box is written (a writer reserves a slot before it writes it).
  - ctl[IV_CTL_ACTIVE]: boxes queued + held by lanes + about to be queued. When it is
    0 there is no box anywhere and nothing can make one: every warp exits.
  - kept boxes (feasible: code 0, undetermined: 1, as sivia.Search) go to out_* under
    the counter ctl[IV_CTL_KEPT]; what cannot go where it should (a full queue or
    output, boxes taken beyond the box limit, boxes held when the kernel stops) goes
    to spill_* (code IV_SPILL_QUEUED: to be checked again; 0 or 1: kept), which has
    2 rows per thread: no lane ever spills more than two boxes in a launch.
  - an early stop (ctl[IV_CTL_STOP] = IV_STOP_*: the queue or the output is full, or
    the time slice is over): every lane spills the box it holds (its progress is lost:
    the box starts again from t = 0 next launch) and exits; the host reads the output,
    the spill and the queue's slots [head, tail), and relaunches.
  - the box limit (box_limit tickets, ctl[IV_CTL_STARTED]): no stop; warps begin no
    more boxes, finish those they hold and exit, so that every ticket becomes an
    evaluation (a stop would throw boxes in progress away and the next launch, with
    the same tickets, could do the same for ever). The boxes left are the host's.

  Memory ordering (why nothing is read before it is written):
  - a box in the queue: the writer stores it (__stcg: to L2), __threadfence(), then
    sets ready[slot]; the reader spins on ready[slot] (volatile), __threadfence(), then
    loads the box with __ldcg (L2, never a stale L1 line that a neighbouring slot's
    earlier read brought in). The fence pair orders the box before the flag.
  - ACTIVE: a warp adds its new halves (and subtracts its finished boxes) before it
    publishes the halves: lane 0's atomicAdd, __threadfence(), then __syncwarp() before
    the writers' stores. A half can only be taken, finished and subtracted after it is
    published, so ACTIVE never reaches 0 while a box exists (it counts the halves from
    before they are visible until after they are finished).
  - counters (evaluated, ...) are per lane and added once at exit; the host reads them
    after the kernel ends.
#}
{% include "sbmlgpu.plugins.interval:model.cuh" %}

/* ctl[] words (unsigned long long); CTL_* in plugins/interval/persistent.py */
#define IV_CTL_HEAD 0          /* next queue slot to read */
#define IV_CTL_TAIL 1          /* queue slots reserved for writing */
#define IV_CTL_ACTIVE 2        /* boxes queued + held + about to be queued */
#define IV_CTL_STARTED 3       /* evaluations begun: tickets against box_limit */
#define IV_CTL_STOP 4          /* 0, or the first IV_STOP_* */
#define IV_CTL_KEPT 5          /* output rows reserved */
#define IV_CTL_SPILLED 6       /* spill rows reserved */
#define IV_CTL_EVALUATED 7     /* the counters sivia.Search keeps, then ... */
#define IV_CTL_FEASIBLE 8
#define IV_CTL_REJECTED 9
#define IV_CTL_BISECTED 10
#define IV_CTL_UNDETERMINED 11
#define IV_CTL_FAILURES 12
#define IV_CTL_STEPS 13        /* Taylor steps of the boxes evaluated */
#define IV_CTL_SPLIT 14        /* boxes bisected by eager create (not evaluated) */
#define IV_CTL_ENCLOSURES 15   /* enclosures evaluated at data times inside steps */
#define IV_CTL_WORDS 16

#define IV_STOP_QUEUE_FULL 1
#define IV_STOP_OUTPUT_FULL 2
#define IV_STOP_TIME 4   /* (3: the box limit, which ends a launch without a stop) */

#define IV_SPILL_QUEUED (-1)   /* a box still to be checked (kept: 0 or 1) */
#define IV_KEPT_FEASIBLE 0
#define IV_KEPT_UNDETERMINED 1

/* sivia.py's bisection rule, bit for bit: the widest edge relative to the search box
   among the edges wider than epsilon (the first on a tie), cut at lo + 0.5 (hi - lo).
   Returns the axis, or -1: every edge <= epsilon, -2: no double between the ends
   (both: kept as undetermined). */
SBMLGPU_HD int iv_bisection(const double *lo, const double *hi, const double *scale,
                            double epsilon, double *middle)
{
    int small = 1;
    for (int j = 0; j < IV_NU; ++j)
        small = small && (hi[j] - lo[j] <= epsilon);
    if (small)
        return -1;
    int axis = 0;
    double best = 0.0;
    for (int j = 0; j < IV_NU; ++j) {
        double width = hi[j] - lo[j];
        double relative = width > epsilon ? width / scale[j] : -1.0;
        if (j == 0 || relative > best) {
            best = relative;
            axis = j;
        }
    }
    double width = hi[axis] - lo[axis];
    double cut = lo[axis] + 0.5 * width;
    if (cut <= lo[axis] || cut >= hi[axis])
        return -2;
    *middle = cut;
    return axis;
}

#ifdef __CUDACC__
#define IV_FULL_WARP 0xffffffffu

__device__ __forceinline__ unsigned long long iv_read(const unsigned long long *word)
{
    return *(const volatile unsigned long long *)word;
}

__device__ __forceinline__ long long iv_now_ns(void)
{
    long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* Reserve up to `want` units of *counter without passing a bound: `limit`, or the
   current value of *bound when it is not NULL (the queue's tail bounds its head).
   all_or_none: `want` units or none (the queue's slots: a slot reserved is a slot a
   reader may wait for, so it must be written). Returns the first unit; *got: how
   many (0 when none is left). One call per warp. */
__device__ unsigned long long iv_reserve(unsigned long long *counter, unsigned long long want,
                                         const unsigned long long *bound,
                                         unsigned long long limit, int all_or_none,
                                         unsigned long long *got)
{
    unsigned long long old = iv_read(counter);
    for (;;) {
        unsigned long long end = bound ? iv_read(bound) : limit;
        unsigned long long n = old >= end ? 0 : min(want, end - old);
        if (all_or_none && n < want)
            n = 0;
        if (n == 0) {
            *got = 0;
            return old;
        }
        unsigned long long seen = atomicCAS(counter, old, old + n);
        if (seen == old) {
            *got = n;
            return old;
        }
        old = seen;
    }
}

__device__ __forceinline__ void iv_request_stop(unsigned long long *ctl, int reason)
{
    atomicCAS(&ctl[IV_CTL_STOP], 0ull, (unsigned long long)reason);
}

/* A spill row: the box and its code (the host reads it after the kernel ends). */
__device__ void iv_spill(unsigned long long *ctl, double *spill_lo, double *spill_hi,
                         signed char *spill_code, const double *lo, const double *hi,
                         int code)
{
    unsigned long long row = atomicAdd(&ctl[IV_CTL_SPILLED], 1ull);
    for (int j = 0; j < IV_NU; ++j) {
        spill_lo[row * IV_NU + j] = lo[j];
        spill_hi[row * IV_NU + j] = hi[j];
    }
    spill_code[row] = (signed char)code;
}

/* Start checking the box (lo, hi) of the searched unknowns; the fixed intervals (the
   initial values given as intervals) follow them in the kernel's inputs. */
__device__ int iv_start_searched(iv_box *b, const double *lo, const double *hi,
                                 const double *fixed_lo, const double *fixed_hi,
                                 const double *point, const iv_problem *P)
{
    double q_lo[IV_NQ > 0 ? IV_NQ : 1], q_hi[IV_NQ > 0 ? IV_NQ : 1];
    for (int j = 0; j < IV_NQ; ++j) {
        q_lo[j] = j < IV_NU ? lo[j] : fixed_lo[j - IV_NU];
        q_hi[j] = j < IV_NU ? hi[j] : fixed_hi[j - IV_NU];
    }
    return iv_box_start(b, q_lo, q_hi, point, P);
}

/* The lane (rank r among the lanes of `mask`): the r-th set bit of mask. */
__device__ __forceinline__ int iv_nth_lane(unsigned mask, int r)
{
    for (int k = 0; k < r; ++k)
        mask &= mask - 1;
    return __ffs(mask) - 1;
}

/* One launch. Blocks are whole warps (the host checks blockDim.x % 32 == 0).
   box_limit: evaluations this launch may begin (the rest of --max-boxes);
   budget: Taylor steps a lane tries between the warp's checks; fetch_idle: idle lanes
   that make the warp fetch (32: only when every lane is idle, i.e. no eager fetch);
   eager_create: bisect busy lanes' boxes for idle lanes when the queue is dry;
   slice_ns: stop after this long (0: never; the host's time limit and progress). */
extern "C" __global__ void iv_persistent(
    double *queue_lo, double *queue_hi, int *ready, unsigned long long capacity,
    unsigned long long *ctl, double *rejected_volume,
    double *out_lo, double *out_hi, signed char *out_code, unsigned long long out_capacity,
    double *spill_lo, double *spill_hi, signed char *spill_code,
    const double *fixed_lo, const double *fixed_hi, const double *scale, double epsilon,
    const double *point, int n_times, const double *times, const int *first,
    const int *output, const double *lower, const double *upper, double wide,
    double max_step, double tolerance, int max_halvings, long long max_steps,
    int span_max, int step_rule, unsigned long long box_limit, long long budget,
    int fetch_idle, int eager_create, long long slice_ns)
{
    iv_problem P;
    P.n_times = n_times; P.times = times; P.first = first; P.output = output;
    P.lower = lower; P.upper = upper; P.max_step = max_step; P.tolerance = tolerance;
    P.epsilon = epsilon; P.wide = wide;
    P.max_halvings = max_halvings; P.max_steps = max_steps;
    P.span_max = span_max; P.step_rule = step_rule;

    const int lane = threadIdx.x & 31;
    const unsigned below = (1u << lane) - 1u;  /* the lanes before this one */
    iv_box box;
    iv_scratch w;
    double lo[IV_NU], hi[IV_NU];
    int have = 0;                 /* this lane holds the box (lo, hi) */
    int verdict = IV_RUNNING;     /* its verdict, once known */
    int out_of_tickets = 0;       /* this warp saw the box limit reached (warp-uniform) */
    unsigned long long evaluated = 0, feasible = 0, rejected = 0, bisected = 0,
                       undetermined = 0, failed = 0, steps = 0, split = 0,
                       enclosures = 0;
    double volume = 0.0;          /* of the boxes rejected */
    const long long started_ns = iv_now_ns();

    for (;;) {
        /* 1. stop: spill what this lane holds (it starts again next launch) */
        int stop = 0;
        if (lane == 0) {
            stop = iv_read(&ctl[IV_CTL_STOP]) != 0;
            if (!stop && slice_ns > 0 && iv_now_ns() - started_ns > slice_ns) {
                iv_request_stop(ctl, IV_STOP_TIME);
                stop = 1;
            }
        }
        if (__shfl_sync(IV_FULL_WARP, stop, 0)) {
            if (have)
                iv_spill(ctl, spill_lo, spill_hi, spill_code, lo, hi, IV_SPILL_QUEUED);
            break;
        }

        /* 2. fetch: when enough lanes are idle, one reservation for the warp. Tickets:
              evaluations begun never pass box_limit; once they run out the warp fetches
              no more (it finishes what it holds and exits: boxes in progress are not
              thrown away, so that a launch at the limit still gets its boxes done). */
        unsigned idle = __ballot_sync(IV_FULL_WARP, !have);
        if (!out_of_tickets && __popc(idle) >= fetch_idle) {
            unsigned long long base = 0, got = 0, allowed = 0;
            int none_left = 0;
            if (lane == 0) {
                none_left = iv_read(&ctl[IV_CTL_STARTED]) >= box_limit;
                if (!none_left)
                    base = iv_reserve(&ctl[IV_CTL_HEAD], __popc(idle), &ctl[IV_CTL_TAIL], 0,
                                      0, &got);
                if (got) {
                    unsigned long long ticket = atomicAdd(&ctl[IV_CTL_STARTED], got);
                    allowed = ticket >= box_limit ? 0 : min(got, box_limit - ticket);
                    none_left = allowed < got;
                }
            }
            base = __shfl_sync(IV_FULL_WARP, base, 0);
            got = __shfl_sync(IV_FULL_WARP, got, 0);
            allowed = __shfl_sync(IV_FULL_WARP, allowed, 0);
            out_of_tickets = __shfl_sync(IV_FULL_WARP, none_left, 0);
            int rank = __popc(idle & below);
            if (!have && rank < (int)got) {
                unsigned long long slot = base + rank;
                while (*(volatile int *)&ready[slot] == 0)
                    __nanosleep(32);  /* reserved by a writer that is storing it now */
                __threadfence();
                for (int j = 0; j < IV_NU; ++j) {
                    lo[j] = __ldcg(&queue_lo[slot * IV_NU + j]);
                    hi[j] = __ldcg(&queue_hi[slot * IV_NU + j]);
                }
                if (rank < (int)allowed) {
                    have = 1;
                    verdict = iv_start_searched(&box, lo, hi, fixed_lo, fixed_hi, point, &P);
                } else {  /* past the box limit: back to the host, unchecked (once a
                             launch: this warp fetches no more) */
                    iv_spill(ctl, spill_lo, spill_hi, spill_code, lo, hi, IV_SPILL_QUEUED);
                }
            }
        }

        /* 3. eager create: the queue is dry and lanes are idle while others are busy:
              a busy lane bisects its box (sivia.py's rule), keeps the lower half and
              hands the upper half to an idle lane; both start again from t = 0. */
        idle = __ballot_sync(IV_FULL_WARP, !have);
        int dry = 0;  /* the queue is empty now (without eager fetch: not even tried) */
        if (eager_create && idle && idle != IV_FULL_WARP && lane == 0)
            dry = iv_read(&ctl[IV_CTL_HEAD]) >= iv_read(&ctl[IV_CTL_TAIL]);
        if (__shfl_sync(IV_FULL_WARP, dry, 0)) {
            double middle = 0.0;
            int axis = have && verdict == IV_RUNNING
                ? iv_bisection(lo, hi, scale, epsilon, &middle) : -1;
            unsigned donors = __ballot_sync(IV_FULL_WARP, axis >= 0);
            unsigned long long pairs = min(__popc(idle), __popc(donors)), allowed = 0;
            if (lane == 0 && pairs) {
                unsigned long long ticket = atomicAdd(&ctl[IV_CTL_STARTED], pairs);
                allowed = ticket >= box_limit ? 0 : min(pairs, box_limit - ticket);
                /* one more box for each pair; nothing is published to other warps */
                if (allowed)
                    atomicAdd(&ctl[IV_CTL_ACTIVE], allowed);
            }
            allowed = __shfl_sync(IV_FULL_WARP, allowed, 0);
            int donor_rank = __popc(donors & below);
            int gives = axis >= 0 && donor_rank < (int)allowed;
            double give_lo[IV_NU], give_hi[IV_NU];
            for (int j = 0; j < IV_NU; ++j) {
                give_lo[j] = lo[j];
                give_hi[j] = hi[j];
            }
            if (gives) {
                give_lo[axis] = middle;  /* the upper half */
                hi[axis] = middle;       /* this lane keeps the lower one */
                ++split;
                verdict = iv_start_searched(&box, lo, hi, fixed_lo, fixed_hi, point, &P);
            }
            int idle_rank = __popc(idle & below);
            int takes = !have && idle_rank < (int)allowed;
            int source = iv_nth_lane(donors, takes ? idle_rank : 0);
            for (int j = 0; j < IV_NU; ++j) {
                double a = __shfl_sync(IV_FULL_WARP, give_lo[j], source & 31);
                double b = __shfl_sync(IV_FULL_WARP, give_hi[j], source & 31);
                if (takes) {
                    lo[j] = a;
                    hi[j] = b;
                }
            }
            if (takes) {
                have = 1;
                verdict = iv_start_searched(&box, lo, hi, fixed_lo, fixed_hi, point, &P);
            }
        }

        /* 4. termination: no lane holds a box; exit when no box exists anywhere, or
              when no box may be begun (the boxes left are the host's) */
        if (__ballot_sync(IV_FULL_WARP, have) == 0) {
            int done = 0;
            if (lane == 0)
                done = out_of_tickets || iv_read(&ctl[IV_CTL_STARTED]) >= box_limit
                       || iv_read(&ctl[IV_CTL_ACTIVE]) == 0;
            if (__shfl_sync(IV_FULL_WARP, done, 0))
                break;
            __nanosleep(256);  /* others are busy: their halves may come */
            continue;
        }

        /* 5. advance: a few steps, so that idle lanes wait at most `budget` steps. The
              lanes of the warp work in step: while one has a data time to check, the
              lanes whose next work is a Taylor step wait, and then they all step
              together (a warp whose lanes are in both would run each path in turn on
              every round: the data times' work and the steps' are each done once for
              the warp). Every lane reaches each ballot: the loop is the warp's. */
        long long steps_left = budget;
        for (;;) {
            int running = have && verdict == IV_RUNNING;
            int check = running && iv_box_check_due(&box, &P);
            int step = running && !check && steps_left > 0;
            unsigned checking = __ballot_sync(IV_FULL_WARP, check);
            unsigned stepping = __ballot_sync(IV_FULL_WARP, step);
            if (!checking && !stepping)
                break;
            if (check || (step && !checking)) {
                steps_left -= step;
                verdict = iv_box_work(&box, &P, 0, &w);
            }
        }

        /* 6. verdicts, as sivia.Search.give: keep, drop, or bisect into the queue */
        int finished = have && verdict != IV_RUNNING;
        int keep = -1, axis = -1;
        double middle = 0.0;
        if (finished) {
            have = 0;
            ++evaluated;
            steps += box.steps;
            enclosures += box.enclosures;
            failed += verdict == IV_FAILED;
            if (verdict == IV_FEASIBLE) {
                ++feasible;
                keep = IV_KEPT_FEASIBLE;
            } else if (verdict == IV_REJECTED) {
                ++rejected;
                double v = 1.0;
                for (int j = 0; j < IV_NU; ++j)
                    v *= hi[j] - lo[j];
                volume += v;
            } else {
                axis = iv_bisection(lo, hi, scale, epsilon, &middle);
                if (axis < 0) {
                    ++undetermined;
                    keep = IV_KEPT_UNDETERMINED;
                } else {
                    ++bisected;
                }
            }
        }
        unsigned finishing = __ballot_sync(IV_FULL_WARP, finished);
        if (finishing == 0)
            continue;
        unsigned halving = __ballot_sync(IV_FULL_WARP, axis >= 0);
        unsigned keeping = __ballot_sync(IV_FULL_WARP, keep >= 0);
        unsigned long long push_base = 0, push_got = 0, out_base = 0, out_got = 0;
        if (lane == 0) {
            if (halving)
                push_base = iv_reserve(&ctl[IV_CTL_TAIL], 2ull * __popc(halving), 0,
                                       capacity, 1, &push_got);
            if (keeping)
                out_base = iv_reserve(&ctl[IV_CTL_KEPT], __popc(keeping), 0, out_capacity,
                                      0, &out_got);
            if (push_got < 2ull * __popc(halving))  /* all or none: none */
                iv_request_stop(ctl, IV_STOP_QUEUE_FULL);
            if (out_got < (unsigned long long)__popc(keeping))
                iv_request_stop(ctl, IV_STOP_OUTPUT_FULL);
            /* every half (queued or spilled) counts before any is visible */
            long long delta = 2ll * __popc(halving) - __popc(finishing);
            atomicAdd(&ctl[IV_CTL_ACTIVE], (unsigned long long)delta);
            __threadfence();
        }
        __syncwarp();
        push_base = __shfl_sync(IV_FULL_WARP, push_base, 0);
        push_got = __shfl_sync(IV_FULL_WARP, push_got, 0);
        out_base = __shfl_sync(IV_FULL_WARP, out_base, 0);
        out_got = __shfl_sync(IV_FULL_WARP, out_got, 0);
        if (axis >= 0) {
            double left_hi[IV_NU], right_lo[IV_NU];
            for (int j = 0; j < IV_NU; ++j) {
                left_hi[j] = j == axis ? middle : hi[j];
                right_lo[j] = j == axis ? middle : lo[j];
            }
            unsigned long long k = 2ull * __popc(halving & below);
            if (k + 2 <= push_got) {
                unsigned long long slot = push_base + k;
                for (int j = 0; j < IV_NU; ++j) {
                    __stcg(&queue_lo[slot * IV_NU + j], lo[j]);
                    __stcg(&queue_hi[slot * IV_NU + j], left_hi[j]);
                    __stcg(&queue_lo[(slot + 1) * IV_NU + j], right_lo[j]);
                    __stcg(&queue_hi[(slot + 1) * IV_NU + j], hi[j]);
                }
                __threadfence();  /* the boxes before their flags */
                atomicExch(&ready[slot], 1);
                atomicExch(&ready[slot + 1], 1);
            } else {
                iv_spill(ctl, spill_lo, spill_hi, spill_code, lo, left_hi, IV_SPILL_QUEUED);
                iv_spill(ctl, spill_lo, spill_hi, spill_code, right_lo, hi, IV_SPILL_QUEUED);
            }
        }
        if (keep >= 0) {
            unsigned long long k = __popc(keeping & below);
            if (k < out_got) {
                unsigned long long row = out_base + k;
                for (int j = 0; j < IV_NU; ++j) {
                    out_lo[row * IV_NU + j] = lo[j];
                    out_hi[row * IV_NU + j] = hi[j];
                }
                out_code[row] = (signed char)keep;
            } else {
                iv_spill(ctl, spill_lo, spill_hi, spill_code, lo, hi, keep);
            }
        }
    }

    /* the counters, once per lane */
    unsigned long long mine[9] = {evaluated, feasible, rejected, bisected, undetermined,
                                  failed, steps, split, enclosures};
    for (int k = 0; k < 9; ++k)
        if (mine[k])
            atomicAdd(&ctl[IV_CTL_EVALUATED + k], mine[k]);
    if (volume != 0.0)
        atomicAdd(rejected_volume, volume);
}
#endif
