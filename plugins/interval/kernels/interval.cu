{#
  interval.cu -- SIVIA verdicts of boxes of a model's interval inputs, one thread per box
  (the multi-kernel scheme: the host bisects between launches). The same text builds
  for the host (SBMLGPU_HOST_ENTRY: OpenMP over boxes), which is the CPU path.
  Context: model.cuh's (the model's functions and sizes).
#}
{% include "sbmlgpu.plugins.interval:model.cuh" %}

#define IV_CHECK_ARGUMENTS \
    long long n_boxes, const double *q_lo, const double *q_hi, const double *point, \
    int n_times, const double *times, const int *first, const int *output, \
    const double *lower, const double *upper, double epsilon, double wide, \
    double max_step, double tolerance, \
    int max_halvings, \
    long long max_steps, int span_max, int step_rule, signed char *verdict, \
    long long *steps, long long *enclosures, ival *record

SBMLGPU_HD void iv_check_one(long long b, IV_CHECK_ARGUMENTS)
{
    iv_problem P;
    P.n_times = n_times; P.times = times; P.first = first; P.output = output;
    P.lower = lower; P.upper = upper; P.max_step = max_step; P.tolerance = tolerance;
    P.epsilon = epsilon; P.wide = wide;
    P.max_halvings = max_halvings; P.max_steps = max_steps;
    P.span_max = span_max; P.step_rule = step_rule;
    iv_box box;
    iv_scratch w;
    verdict[b] = (signed char)iv_check_box(&box, q_lo + b * IV_NQ, q_hi + b * IV_NQ, point,
                                           &P, record ? record + b * n_times * IV_N : 0,
                                           &w);
    steps[b] = box.steps;
    enclosures[b] = box.enclosures;
}

#ifdef __CUDACC__
extern "C" __global__ void iv_check(IV_CHECK_ARGUMENTS)
{
    long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (b < n_boxes)
        iv_check_one(b, n_boxes, q_lo, q_hi, point, n_times, times, first, output, lower,
                     upper, epsilon, wide, max_step, tolerance, max_halvings, max_steps,
                     span_max, step_rule, verdict, steps, enclosures, record);
}
#endif

#ifdef SBMLGPU_HOST_ENTRY
extern "C" int iv_check_host(IV_CHECK_ARGUMENTS)
{
    #pragma omp parallel for schedule(dynamic, 1)
    for (long long b = 0; b < n_boxes; ++b)
        iv_check_one(b, n_boxes, q_lo, q_hi, point, n_times, times, first, output, lower,
                     upper, epsilon, wide, max_step, tolerance, max_halvings, max_steps,
                     span_max, step_rule, verdict, steps, enclosures, record);
    return 0;
}
#endif
