{#
  dbn.cu -- one kernel of the `dbn` backend: one thread integrates one sampled
  trajectory with fixed-step RK4 (the step: slice time / steps) and hands the values
  of every variable at every time slice to the output sink: the CPT sink
  (sink_cpt.cuh: bins, counts of every transition) or the range sink
  (sink_range.cuh: min and max over all trajectories and slices, the default bin
  ranges). Composed from sbmlgpu.ode's templates as the ode backend's kernel is;
  the context is sbmlgpu.ode.codegen.kernel_context's. The same text compiles as
  CUDA and as host C++ (-DSBMLGPU_HOST_ENTRY: the CPU path).
#}
{% if method != "rk4" %}
{{ fail("dbn.cu: the DBN approximation integrates with fixed-step rk4, not " ~ method) }}
{% endif %}
{% include "sbmlgpu.ode:kernel.cuh" %}

{% include "sbmlgpu.plugins.dbn:replay.cuh" %}
