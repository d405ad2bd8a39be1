{#
  interval.cu -- SIVIA verdicts of boxes of a model's interval inputs, one thread per box
  (the multi-kernel scheme: the host bisects between launches). The same text builds
  for the host (SBMLGPU_HOST_ENTRY: OpenMP over boxes), which is the CPU path.
  Context: model (the model's id), n, nq, nc, ny, order, varied (indices in c of the
  interval inputs), functions (the generated C functions, text), ids (comment lines).
#}
{% include "common.cuh" %}
{% include "interval.cuh" %}
#define SBMLGPU_TAYLOR_ORDER {{ order }}
{% include "taylor.cuh" %}

/* model {{ model }}: {{ n }} state(s), {{ nq }} interval input(s), {{ nc }} constant(s),
   {{ ny }} measured value(s); Taylor order {{ order }}.
{% for line in ids %}
   {{ line }}
{% endfor %}
*/
#define IV_N {{ n }}
#define IV_NQ {{ nq }}
#define IV_NU {{ nu }}  /* the first IV_NU interval inputs are the unknowns (bisected) */
#define IV_D (IV_N + IV_NQ)
#define IV_NC {{ nc }}
#define IV_NY {{ ny }}
/* the index in c of interval input j */
SBMLGPU_HD int iv_varied(int j)
{
    switch (j) {
{% for index in varied %}
    case {{ loop.index0 }}: return {{ index }};
{% endfor %}
    default: return 0;
    }
}

{{ functions }}
/* box verdicts, from plugins/interval/verdicts.py */
{% for name, code in verdicts.items() %}
#define IV_{{ name }} {{ code }}
{% endfor %}
{% include "sbmlgpu.plugins.interval:validated.cuh" %}

#define IV_CHECK_ARGUMENTS \
    long long n_boxes, const double *q_lo, const double *q_hi, const double *point, \
    int n_times, const double *times, const int *first, const int *output, \
    const double *lower, const double *upper, double epsilon, double wide, \
    double max_step, double tolerance, \
    int max_halvings, \
    long long max_steps, signed char *verdict, long long *steps, ival *record

SBMLGPU_HD void iv_check_one(long long b, IV_CHECK_ARGUMENTS)
{
    iv_problem P;
    P.n_times = n_times; P.times = times; P.first = first; P.output = output;
    P.lower = lower; P.upper = upper; P.max_step = max_step; P.tolerance = tolerance;
    P.epsilon = epsilon; P.wide = wide;
    P.max_halvings = max_halvings; P.max_steps = max_steps;
    iv_box box;
    iv_scratch w;
    verdict[b] = (signed char)iv_check_box(&box, q_lo + b * IV_NQ, q_hi + b * IV_NQ, point,
                                           &P, record ? record + b * n_times * IV_N : 0,
                                           &w);
    steps[b] = box.steps;
}

#ifdef __CUDACC__
extern "C" __global__ void iv_check(IV_CHECK_ARGUMENTS)
{
    long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (b < n_boxes)
        iv_check_one(b, n_boxes, q_lo, q_hi, point, n_times, times, first, output, lower,
                     upper, epsilon, wide, max_step, tolerance, max_halvings, max_steps,
                     verdict, steps, record);
}
#endif

#ifdef SBMLGPU_HOST_ENTRY
extern "C" int iv_check_host(IV_CHECK_ARGUMENTS)
{
    #pragma omp parallel for schedule(dynamic, 1)
    for (long long b = 0; b < n_boxes; ++b)
        iv_check_one(b, n_boxes, q_lo, q_hi, point, n_times, times, first, output, lower,
                     upper, epsilon, wide, max_step, tolerance, max_halvings, max_steps,
                     verdict, steps, record);
    return 0;
}
#endif
