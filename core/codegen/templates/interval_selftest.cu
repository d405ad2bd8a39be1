{#
  interval_selftest.cu -- an op table around interval.cuh for its tests: every
  function of the header, applied to n argument rows, on the GPU (one thread a row)
  or on the host (a loop). Rendered by sbmlgpu.codegen.interval_selftest.
  Context: ops (OpEntry: name, kind, call, inexact), after_common (include
  common.cuh first), oracle (host only: also the scalar ops under the hardware's
  own directed rounding, fesetround, as a reference for the emulation).
  Rows: in[4 i .. 4 i + 3] = (a, b, c, d); x = [a, b], y = [c, d]. Results: out[2 i],
  out[2 i + 1]: an interval's lo, hi; a number and 0; a scalar op's result and 1
  where the host emulation is only an enclosure (fallback ranges, interval.cuh).
#}
{% if after_common %}
{% include "common.cuh" %}
{% endif %}
{% include "interval.cuh" %}

SBMLGPU_HD void sbmlgpu_iv_apply(int op, const double* in, double* out)
{
    const double a = in[0], b = in[1], c = in[2];
    const ival x = iv_make(in[0], in[1]), y = iv_make(in[2], in[3]);
    (void)a; (void)b; (void)c; (void)x; (void)y;
    out[0] = 0.0;
    out[1] = 0.0;
    switch (op) {
{% for op in ops %}
    case {{ op.index }}: /* {{ op.name }} */
{% if op.kind == "interval" %}
        { ival r = {{ op.call }}; out[0] = r.lo; out[1] = r.hi; }
{% elif op.kind == "scalar" %}
        out[0] = {{ op.call }};
        out[1] = ({{ op.inexact }}) == SBMLGPU_INEXACT ? 1.0 : 0.0;
{% elif op.kind == "number" %}
        out[0] = {{ op.call }};
{% elif op.kind == "predicate" %}
        out[0] = ({{ op.call }}) ? 1.0 : 0.0;
{% else %}
{{ fail("interval_selftest.cu: unknown op kind " ~ op.kind) }}
{% endif %}
        break;
{% endfor %}
    default:
        out[0] = out[1] = -1.0;
    }
}

#ifdef __CUDACC__
extern "C" __global__ void sbmlgpu_iv_optable(int op, int n, const double* in, double* out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) sbmlgpu_iv_apply(op, in + 4 * (long long)i, out + 2 * (long long)i);
}
#else
extern "C" void sbmlgpu_iv_optable_host(int op, long long n, const double* in, double* out)
{
    for (long long i = 0; i < n; ++i) sbmlgpu_iv_apply(op, in + 4 * i, out + 2 * i);
}
{% if oracle %}

#include <fenv.h>

/* The scalar ops computed by the CPU in the rounding direction asked for (build with
   -frounding-math; volatile keeps the compiler from evaluating them in another mode).
   The emulation must equal these bit for bit outside its fallback ranges. */
extern "C" int sbmlgpu_iv_oracle_host(int op, long long n, const double* in, double* out)
{
    const int saved = fegetround();
    int known = 1;
    for (long long i = 0; i < n; ++i) {
        volatile double a = in[4 * i], b = in[4 * i + 1], c = in[4 * i + 2], r = 0.0;
        switch (op) {
{% for op in ops if op.kind == "scalar" %}
        case {{ op.index }}: /* {{ op.name }} */
            fesetround({{ op.mode }});
            r = {{ op.oracle }};
            break;
{% endfor %}
        default:
            known = 0;
        }
        fesetround(saved);
        out[2 * i] = r;
        out[2 * i + 1] = 0.0;
        (void)c;
    }
    return known;
}
{% endif %}
#endif
