"""`sbmlgpu.petab.simulate_problem`: a PEtab problem at its nominal parameters or for
an ensemble of parameter sets, with the simulation table, likelihood and chi2."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import OptionError
from ..results.status import Status
from .likelihood import terms
from .objective import ObjectiveReduction
from .observables import Formulas
from .problem import PetabProblem, load_problem
from .simulate import PETAB_CODES, Runs, Simulation
from .values import nominal_sets, sampled_sets, set_count, table_sets


@dataclass
class PetabResult:
    """What simulate_problem computed. `simulation` and `sigma`: (rows of the
    measurement table, sets); `nll`, `chi2`, `status`: one per set (member);
    `sets`: {parameterId: one linear-scale value per set}."""

    problem: PetabProblem
    sets: dict[str, np.ndarray]
    simulation: np.ndarray
    sigma: np.ndarray
    nll: np.ndarray
    chi2: np.ndarray
    status: np.ndarray
    messages: dict[int, str] = field(default_factory=dict)

    @property
    def n_members(self) -> int:
        return len(self.status)

    @property
    def llh(self) -> float:
        """The log-likelihood of member 0 (the nominal parameters)."""
        return -float(self.nll[0])

    def simulation_df(self, member: int = 0):
        """The measurement table with `simulation` in place of `measurement`."""
        df = self.problem.measurements.copy()
        df.insert(list(df.columns).index("measurement"), "simulation",
                  self.simulation[:, member])
        return df.drop(columns=["measurement"])

    def failures(self) -> list[tuple[int, Status, str]]:
        return [(int(i), Status(int(self.status[i])),
                 self.messages.get(int(i), Status(int(self.status[i])).message))
                for i in np.flatnonzero(self.status != int(Status.ok))]

    # -- files ---------------------------------------------------------------------------
    def write_nominal(self, outdir: Path) -> list[Path]:
        outdir.mkdir(parents=True, exist_ok=True)
        sims = outdir / "simulations.tsv"
        self.simulation_df(0).to_csv(sims, sep="\t", index=False)
        status = Status(int(self.status[0]))
        llh = outdir / "likelihood.json"
        llh.write_text(json.dumps({
            "problem": str(self.problem.path), "llh": _json_number(-self.nll[0]),
            "nllh": _json_number(self.nll[0]), "chi2": _json_number(self.chi2[0]),
            "status": status.name, "message": self.messages.get(0, "") if status else "",
            "measurements": int(self.simulation.shape[0])}, indent=2) + "\n")
        return [sims, llh]

    def write_objective(self, outdir: Path) -> list[Path]:
        import pandas as pd

        outdir.mkdir(parents=True, exist_ok=True)
        estimated = [q.id for q in self.problem.parameters if q.estimate]
        table = {"member": np.arange(self.n_members)}
        table.update({pid: self.sets[pid] for pid in estimated})
        table["nllh"] = self.nll
        table["chi2"] = self.chi2
        table["status"] = [Status(int(s)).name for s in self.status]
        path = outdir / "objective.tsv"
        pd.DataFrame(table).to_csv(path, sep="\t", index=False)
        return [path]


def _json_number(v: float):
    return float(v) if math.isfinite(v) else None


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
    naming the file and what is missing for what it cannot run."""
    p = problem if isinstance(problem, PetabProblem) else load_problem(problem)
    if ensemble is not None and parameters is not None:
        raise OptionError("ensemble", "give either --ensemble N or --parameters TABLE")
    if ensemble is not None:
        sets = sampled_sets(p, ensemble, seed)
    elif parameters is not None:
        sets = table_sets(p, parameters)
    else:
        sets = nominal_sets(p)
    n = set_count(sets)
    formulas = Formulas(p)
    runs = Runs.of(p)
    # an ensemble's objective is reduced on the GPU where the ode backend runs there
    # (no time courses come back); one member keeps its simulation table
    objective = (lambda outputs: ObjectiveReduction.build(formulas, runs, sets, n, outputs)) \
        if n > 1 and backend == "ode" else None
    simulated = Simulation(p, sets, n, backend=backend, device=device,
                           options=options).run(runs, formulas.model_ids, objective)
    sim, sigma = formulas.evaluate(simulated.values, sets, n)

    meas = p.measurements
    obs = p.problem.observable_df
    ids = meas["observableId"].to_numpy()
    scale = _column(obs, "observableTransformation", "lin").reindex(ids).to_numpy()
    dist = _column(obs, "noiseDistribution", "normal").reindex(ids).to_numpy()
    nll_rows, chi2_rows = terms(meas["measurement"].to_numpy(float), sim, sigma,
                                scale.astype(str), dist.astype(str))
    status, messages = _member_status(simulated, runs, n)
    if simulated.reduced is None:
        nll, chi2 = nll_rows.sum(axis=0), chi2_rows.sum(axis=0)
    else:  # the rows at finite times were scored on the device; t = inf rows here
        at_inf = runs.row_time_index < 0
        nll = simulated.reduced[0] + nll_rows[at_inf].sum(axis=0)
        chi2 = simulated.reduced[1] + chi2_rows[at_inf].sum(axis=0)
    bad = (status == int(Status.ok)) & ~(np.isfinite(nll) & np.isfinite(chi2))
    status[bad] = int(NON_FINITE_OBJECTIVE)
    for j in np.flatnonzero(bad):
        messages[int(j)] = NON_FINITE_OBJECTIVE.message
    return PetabResult(p, sets, sim, sigma, nll, chi2, status, messages)


NON_FINITE_OBJECTIVE = Status.define(
    "non_finite_objective", "the simulations succeeded but the likelihood is not finite "
                            "(a simulated value outside a log transformation's domain, "
                            "or a noise sigma that is not positive)", code=PETAB_CODES + 1)


def _column(df, name: str, default: str):
    import pandas as pd

    if name not in df.columns:
        return pd.Series(default, index=df.index)
    return df[name].fillna(default).replace("", default)


def _member_status(simulated, runs: Runs, n: int) -> tuple[np.ndarray, dict[int, str]]:
    """A member (set) fails with the first failure of any of its runs."""
    status = np.zeros(n, np.int8)
    messages: dict[int, str] = {}
    for k in range(len(runs.pairs)):
        for j in np.flatnonzero((status == 0) & (simulated.status[k] != 0)):
            status[j] = simulated.status[k, j]
            pre, sim = runs.pairs[k]
            where = f"condition {sim}" + (f" after preequilibration {pre}" if pre else "")
            note = simulated.messages.get((k, int(j)), "") or Status(int(status[j])).message
            messages[int(j)] = f"{where}: {note}"
    return status, messages
