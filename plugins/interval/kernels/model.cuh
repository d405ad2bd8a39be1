{#
  model.cuh -- the model part every interval kernel includes: the arithmetic, the
  model's generated functions and sizes, and the validated integrator (validated.cuh).
  Context: model (the model's id), n, nq, nu, nc, ny, order, varied (indices in c of
  the interval inputs: the nu searched unknowns first, then the fixed initial
  intervals), verdicts (verdicts.CODES), functions (the generated C functions, text),
  ids (comment lines).
#}
{% include "common.cuh" %}
{% include "interval.cuh" %}
#define SBMLGPU_TAYLOR_ORDER {{ order }}
{% include "taylor.cuh" %}

/* model {{ model }}: {{ n }} state(s), {{ nq }} interval input(s) ({{ nu }} searched),
   {{ nc }} constant(s), {{ ny }} measured value(s); Taylor order {{ order }}.
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
