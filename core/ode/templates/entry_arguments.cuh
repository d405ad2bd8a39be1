{#
  entry_arguments.cuh -- the argument list of an ensemble kernel's CUDA entry point
  (entry.cuh), as a macro: n, table, times, n_times, the sink's arguments
  (`sink.params`), status, steps, the settings, members and first_member. A backend
  kernel with its own body (the dbn backend's heterogeneous kernel) takes the same
  list, so that one launch serves both. With `limits` (the ode backend's kernel) two
  more follow: the steps per output interval and the member's wall time in ns
  (limits.cuh; 0: no limit), then the table row of each member's output count
  (limits.cuh; -1: none). With `history` (a model with delay()) the launch's ring
  of history nodes follows last (delay.cuh). `kernel_argument_names`: the same list's
  names, to pass them on.
#}
{% macro kernel_arguments(sink, limits=false, history=false) -%}
long long n, const real_t* __restrict__ table,
                         const real_t* __restrict__ times, int n_times,
                         {{ sink.params }}, signed char* __restrict__ status,
                         int* __restrict__ steps, real_t rtol, real_t atol, real_t h0,
                         real_t max_step, real_t dt, long long max_steps,
                         unsigned long long seed,
                         const unsigned long long* __restrict__ members,
                         unsigned long long first_member
{%- if limits %},
                         long long max_interval_steps, long long time_limit_ns,
                         long long times_row
{%- endif %}
{%- if history %},
                         real_t* __restrict__ history
{%- endif %}
{%- endmacro %}
{% macro kernel_argument_names(sink, limits=false, history=false) -%}
n, table, times, n_times,
{%- for param in sink.params.split(",") %} {{ param.replace("*", " ").split()[-1] }},{% endfor %}
 status, steps, rtol, atol, h0, max_step, dt, max_steps, seed, members, first_member
{%- if limits %}, max_interval_steps, time_limit_ns, times_row{% endif %}
{%- if history %}, history{% endif %}
{%- endmacro %}
