"""KiSAO algorithm ids -> our backends, and the substitution policy.

An id we implement runs on its backend: deterministic ODE methods on `ode` (which
falls back to the `reference` backend where `ode` refuses the model), Gillespie-type
stochastic methods on `ssa`. Any other id follows the substitution policy, named as
BioSimulators names its levels: NONE refuses it; SIMILAR_APPROXIMATIONS (the default)
runs it on `ode` with a warning naming the id and what ran instead.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..errors import OptionError, UnsupportedModelError

log = logging.getLogger("sbmlgpu")

ODE = {
    "KISAO_0000019": "CVODE", "KISAO_0000496": "CVODES", "KISAO_0000433": "CVODE-like method",
    "KISAO_0000088": "LSODA", "KISAO_0000560": "LSODA/LSODAR hybrid method",
    "KISAO_0000089": "LSODAR", "KISAO_0000071": "LSODE", "KISAO_0000094": "Livermore solver",
    "KISAO_0000535": "VODE", "KISAO_0000087": "Dormand-Prince method",
    "KISAO_0000435": "DOPRI5", "KISAO_0000086": "Fehlberg method",
    "KISAO_0000032": "explicit fourth-order Runge-Kutta method",
    "KISAO_0000064": "Runge-Kutta based method", "KISAO_0000694": "ODE solver",
}
SSA = {
    "KISAO_0000029": "Gillespie direct method", "KISAO_0000027": "Gibson-Bruck next "
    "reaction method", "KISAO_0000241": "Gillespie-like method",
    "KISAO_0000038": "sorting stochastic simulation algorithm",
}
#: steady-state methods: simulate until the state stops changing (core/ode_steady_state.py)
STEADY = {"KISAO_0000407": "steady state root-finding", "KISAO_0000437": "steady state "
          "method", "KISAO_0000569": "NLEQ2", "KISAO_0000568": "NLEQ1", **ODE}
POLICIES = ("NONE", "SIMILAR_APPROXIMATIONS")
DEFAULT_POLICY = "SIMILAR_APPROXIMATIONS"
#: algorithm parameters -> ode backend options
PARAMETERS = {"KISAO_0000209": "rtol", "KISAO_0000211": "atol", "KISAO_0000415": "max_steps"}


@dataclass(frozen=True)
class Method:
    backend: str  # "ode" or "ssa"
    options: dict  # backend options from the algorithm's parameters


def normalise(kisao_id: str) -> str:
    text = (kisao_id or "").strip().replace(":", "_")
    return text.upper() if text.upper().startswith("KISAO_") else text


def choose(algorithm, where: str, *, steady: bool = False,
           policy: str = DEFAULT_POLICY) -> Method:
    """The backend that runs an algorithm of a simulation (`where` names it)."""
    kisao = normalise(algorithm.getKisaoID() if algorithm is not None else "")
    known = STEADY if steady else {**ODE, **SSA}
    if kisao in known:
        backend = "ssa" if kisao in SSA else "ode"
        name = known[kisao]
    elif policy == "NONE":
        raise UnsupportedModelError({f"algorithm {kisao or '(none)'}": (where,)},
                                    who="sbmlgpu omex (algorithm substitution policy NONE)")
    else:
        backend, name = "ode", None
        log.warning(f"{where}: algorithm {kisao or '(none given)'} is not one we implement; "
                    f"using the ode backend's deterministic integrator instead "
                    f"(substitution policy SIMILAR_APPROXIMATIONS)")
    return Method(backend, _options(algorithm, backend, where))


def _options(algorithm, backend: str, where: str) -> dict:
    options = {}
    if algorithm is None or backend != "ode":
        return options
    for k in range(algorithm.getNumAlgorithmParameters()):
        parameter = algorithm.getAlgorithmParameter(k)
        kisao = normalise(parameter.getKisaoID())
        option = PARAMETERS.get(kisao)
        if option is None:
            log.warning(f"{where}: algorithm parameter {kisao} is not used (we read "
                        f"{', '.join(PARAMETERS)})")
            continue
        try:
            value = float(parameter.getValue())
        except ValueError:
            raise OptionError("algorithm parameter", f"{where}: {kisao} = "
                                                     f"{parameter.getValue()!r} is not a "
                                                     f"number") from None
        options[option] = int(value) if option == "max_steps" else value
    return options
