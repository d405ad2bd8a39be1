{#
  ode.cu -- one ensemble kernel of the `ode` backend: one thread integrates one
  trajectory (one parameter set) with the method `method` and hands its outputs at
  every output time to the output sink (sbmlgpu.ode's trajectory sink for time
  courses and --summary), with its status and its step count.

  Composed from sbmlgpu.ode's templates (core/ode/templates); the context is
  sbmlgpu.ode.codegen.kernel_context's. The same text compiles as CUDA (nvcc: the
  kernel) and as host C++ (g++ -DSBMLGPU_HOST_ENTRY: a C function over all members,
  used by the CPU path and by the tests that check the integrators without a GPU).
  Its entry points take the launch's limits (steps per output interval, a member's
  wall time: sbmlgpu.ode's limits.cuh) after the common arguments. With `refill`
  (--lane-refill on a GPU) the CUDA entry's threads take the next member when theirs
  ends (entry.cuh says how).
#}
{% set limits = true %}
{% include "sbmlgpu.ode:kernel.cuh" %}
