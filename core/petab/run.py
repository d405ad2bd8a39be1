"""`sbmlgpu.petab.simulate_problem`: a PEtab problem at its nominal parameters or for
an ensemble of parameter sets, with the simulation table, likelihood and chi2 (one
call of the prepared objective, prepared.PreparedObjective)."""

from __future__ import annotations

from ..errors import OptionError
from .prepared import PreparedObjective
from .problem import PetabProblem, load_problem
from .result import PetabResult
from .values import sampled_sets


def simulate_problem(problem, *, ensemble: int | None = None, parameters=None,
                     seed: int = 0, backend: str | None = "ode", device="auto",
                     options=None) -> PetabResult:
    """Simulate a PEtab problem (a YAML path or a loaded PetabProblem).

    Without `ensemble` or `parameters`: one member at the nominal values. `ensemble`
    N: N sets sampled uniformly within the bounds on each estimated parameter's
    scale (Philox keyed by `seed` and parameterId). `parameters`: a table (CSV path,
    rows = sets, columns = parameterIds, linear scale) or {parameterId: values}.
    Every (condition, set) runs as one batched ensemble of `backend` ("ode": the GPU
    where there is one, else its CPU path; "reference"). `device`: "auto", "cpu" or
    GPU indices. Returns a PetabResult; raises OptionError / UnsupportedModelError
    naming the file and what is missing for what it cannot run. To evaluate many
    sets call after call, prepare the problem once: sbmlgpu.petab.objective."""
    p = problem if isinstance(problem, PetabProblem) else load_problem(problem)
    if ensemble is not None and parameters is not None:
        raise OptionError("ensemble", "give either --ensemble N or --parameters TABLE")
    objective = PreparedObjective(p, backend=backend, device=device, options=options,
                                  keep_kernel=False)
    if ensemble is not None:
        return objective.evaluate(sampled_sets(p, ensemble, seed))
    return objective(parameters)
