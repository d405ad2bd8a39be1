{#
  objective.cu -- a PEtab problem's negative log-likelihood and chi2 on the device,
  from the time courses of one batch as the ode kernel's trajectory sink left them
  (out[(k * n_outputs + c) * b + i]: time k, output c, launch index i), so that an
  ensemble of parameter sets returns one pair of numbers per member instead of its
  time courses.

  One thread per member of the batch. Its time courses are in column i of out, or
  in a bundled launch of a contiguous range of members (members given, first_member
  not PETAB_LAUNCH_ORDER) in column members[i] - first_member, as the sink put them
  (sbmlgpu.ode.sinks.TrajectorySink). Member m (members[i], or first_member + i) is
  run m / n_sets (a pair of preequilibration and simulation condition) with
  parameter set m % n_sets. The thread sums, over the measurement rows of its run
  (rows run_rows[run] .. run_rows[run + 1] - 1, those at a finite time; or, in
  the host build that scores the rows at t = inf, those rows, each reading time
  index 0 of its run's steady state), the terms
  of sbmlgpu.petab.likelihood.terms: the observable and its noise sigma (the
  problem's formulas, one function per observable below), on the
  observableTransformation's scale, normal or laplace. It writes nll[i] and chi2[i]
  (launch order), NaN for a member whose status is not ok.

  Per row: its output time index, observable, measurement, time, and `slots`
  placeholder values (observableParameter{k}_{id} then noiseParameter{k}_{id}),
  each a number (slot_q < 0: slot_value) or the set's value of a parameterId
  (q[slot_q * n_sets + set]). parameterIds in formulas read q the same way.
  Context: precision, observables (id, observable, noise, scale, distribution),
  slots.
#}
{% include "common.cuh" %}

#define PETAB_LOG10 2.302585092994045684
#define PETAB_LAUNCH_ORDER 0xFFFFFFFFFFFFFFFFULL /* sbmlgpu.ode.sinks.LAUNCH_ORDER */
#define PETAB_TWO_PI 6.283185307179586477

/* what an observable's formulas read: the outputs at the row's time, the row's
   placeholders, this set's parameters */
typedef struct {
    const real_t* __restrict__ out;  /* out + (time index * n_outputs) * b + i */
    long long stride;                /* b: members in the batch */
    const double* ph;                /* the row's placeholder values */
    const double* __restrict__ q;    /* q + set */
    long long n_sets;
    double t;
} petab_row;

#define PETAB_OUT(c) ((double)row->out[(long long)(c) * row->stride])
#define PETAB_Q(k) (row->q[(long long)(k) * row->n_sets])

{% for o in observables %}
/* observable {{ o.id }}: {{ o.scale }} scale, {{ o.distribution }} noise */
SBMLGPU_HD double petab_observable_{{ loop.index0 }}(const petab_row* row)
{
    (void)row;
    return {{ o.observable }};
}

SBMLGPU_HD double petab_noise_{{ loop.index0 }}(const petab_row* row, double y)
{
    (void)row; (void)y;
    return {{ o.noise }};
}

{% endfor %}
/* the terms of one row: adds to nll and chi2 */
SBMLGPU_HD void petab_row_terms(int observable, const petab_row* row, double measurement,
                                double* nll, double* chi2)
{
    double y = NAN, sigma = NAN;
    int scale = 0, laplace = 0;  /* scale: 0 lin, 1 log, 2 log10 */
    switch (observable) {
{% for o in observables %}
    case {{ loop.index0 }}:  /* {{ o.id }} */
        y = petab_observable_{{ loop.index0 }}(row);
        sigma = petab_noise_{{ loop.index0 }}(row, y);
        scale = {{ {"lin": 0, "log": 1, "log10": 2}[o.scale] }};
        laplace = {{ 1 if o.distribution == "laplace" else 0 }};
        break;
{% endfor %}
    default:
        break;
    }
    double s = y, m = measurement, jacobian = 1.0;
    if (scale == 1) { s = log(y); m = log(measurement); jacobian = measurement; }
    else if (scale == 2) { s = log10(y); m = log10(measurement); jacobian = measurement * PETAB_LOG10; }
    /* a sigma that is not positive is no noise model: the normal's sigma^2 would score
       a negative one as its absolute value (likelihood.py does the same) */
    if (!(sigma > 0.0)) sigma = NAN;
    const double r = (s - m) / sigma;
    if (laplace) *nll += log(2.0 * sigma * jacobian) + fabs(r);
    else *nll += 0.5 * log(PETAB_TWO_PI * (sigma * sigma) * (jacobian * jacobian)) + 0.5 * r * r;
    *chi2 += r * r;
}

SBMLGPU_HD void petab_member(long long i, long long b, long long n_sets,
                             const real_t* __restrict__ out, int n_outputs,
                             const signed char* __restrict__ status, unsigned long long member,
                             long long column,
                             const int* __restrict__ run_rows, const int* __restrict__ row_time,
                             const int* __restrict__ row_observable,
                             const double* __restrict__ row_measurement,
                             const double* __restrict__ row_t,
                             const int* __restrict__ slot_q, const double* __restrict__ slot_value,
                             const double* __restrict__ q, double* __restrict__ nll,
                             double* __restrict__ chi2)
{
    if (status[i] != SBMLGPU_STATUS_OK) {
        nll[i] = NAN;
        chi2[i] = NAN;
        return;
    }
    const long long run = (long long)(member / (unsigned long long)n_sets);
    const long long set = (long long)(member % (unsigned long long)n_sets);
    double total = 0.0, squares = 0.0;
    double ph[{{ [slots, 1] | max }}];
    petab_row row;
    row.stride = b;
    row.q = q + set;
    row.n_sets = n_sets;
    row.ph = ph;
    for (int r = run_rows[run]; r < run_rows[run + 1]; ++r) {
        row.out = out + (long long)row_time[r] * n_outputs * b + column;
        row.t = row_t[r];
{% for k in range(slots) %}
        ph[{{ k }}] = slot_q[(long long)r * {{ slots }} + {{ k }}] < 0
            ? slot_value[(long long)r * {{ slots }} + {{ k }}]
            : q[(long long)slot_q[(long long)r * {{ slots }} + {{ k }}] * n_sets + set];
{% endfor %}
        petab_row_terms(row_observable[r], &row, row_measurement[r], &total, &squares);
    }
    nll[i] = total;
    chi2[i] = squares;
}

#ifdef __CUDACC__
extern "C" __global__ void sbmlgpu_petab_objective(
    long long b, long long n_sets, const real_t* __restrict__ out, int n_outputs,
    const signed char* __restrict__ status, const unsigned long long* __restrict__ members,
    unsigned long long first_member, const int* __restrict__ run_rows,
    const int* __restrict__ row_time, const int* __restrict__ row_observable,
    const double* __restrict__ row_measurement, const double* __restrict__ row_t,
    const int* __restrict__ slot_q, const double* __restrict__ slot_value,
    const double* __restrict__ q, double* __restrict__ nll, double* __restrict__ chi2)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= b) return;
    const unsigned long long member = members ? members[i] : first_member + (unsigned long long)i;
    const long long column = (members && first_member != PETAB_LAUNCH_ORDER)
        ? (long long)(member - first_member) : i;
    petab_member(i, b, n_sets, out, n_outputs, status, member, column, run_rows, row_time,
                 row_observable, row_measurement, row_t, slot_q, slot_value, q, nll, chi2);
}
#endif

#ifdef SBMLGPU_HOST_ENTRY
/* The same on the host, member after member (tests run it on the CPU path's time
   courses). Returns 0. */
extern "C" int sbmlgpu_petab_objective_host(
    long long b, long long n_sets, const real_t* out, int n_outputs,
    const signed char* status, const unsigned long long* members,
    unsigned long long first_member, const int* run_rows, const int* row_time,
    const int* row_observable, const double* row_measurement, const double* row_t,
    const int* slot_q, const double* slot_value, const double* q, double* nll, double* chi2)
{
    for (long long i = 0; i < b; ++i) {
        const unsigned long long member = members ? members[i] : first_member + (unsigned long long)i;
        const long long column = (members && first_member != PETAB_LAUNCH_ORDER)
            ? (long long)(member - first_member) : i;
        petab_member(i, b, n_sets, out, n_outputs, status, member, column, run_rows, row_time,
                     row_observable, row_measurement, row_t, slot_q, slot_value, q, nll, chi2);
    }
    return 0;
}
#endif
