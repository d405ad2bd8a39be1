{#
  kernel.cuh -- an ensemble kernel composed from the templates here, in their order:
  common, prelude, the model's functions, the method (rk4, dopri5, rodas4, bdf), events
  where atoms are watched, the output sink (`sink.template`), the driver and the
  entry points. A backend's kernel template includes it after its own checks (the
  ode backend's kernels/ode.cu, the dbn backend's kernels/dbn.cu). Context:
  sbmlgpu.ode.codegen.kernel_context's.
#}
{# rk4 without atoms, delay() or fast reactions: driver.cuh's tight loop #}
{% set tight_rk4 = method == "rk4" and not watch and not history and not fast %}
{# lanes that take the next member when theirs ends (driver.cuh, entry.cuh): where the
   context asks (`refill`), the sink keeps no per-member locals and the general driver
   runs (the tight loop's members all take the same steps) #}
{% set refill_lanes = (refill is defined and refill) and not sink.locals and not tight_rk4 %}
{% include "common.cuh" %}
{% include "sbmlgpu.ode:prelude.cuh" %}

{% include "sbmlgpu.ode:model.cuh" %}

{% if method == "rk4" %}
{% include "sbmlgpu.ode:rk4.cuh" %}
{% elif method == "dopri5" %}
{% include "sbmlgpu.ode:dopri5.cuh" %}
{% elif method == "rodas4" %}
{% include "sbmlgpu.ode:rodas4.cuh" %}
{% elif method == "bdf" %}
{% include "sbmlgpu.ode:bdf.cuh" %}
{% else %}
{{ fail("kernel.cuh: unknown method " ~ method) }}
{% endif %}
{% if watch %}

{% include "sbmlgpu.ode:events.cuh" %}
{% endif %}

{% include sink.template %}

{% include "sbmlgpu.ode:driver.cuh" %}

{% include "sbmlgpu.ode:entry.cuh" %}
