"""What a PEtab problem's simulation gives: per parameter set the negative
log-likelihood, chi2 and status, and the simulated values the host holds."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..results.status import Status
from .problem import PetabProblem
from .simulate import PETAB_CODES


@dataclass
class PetabResult:
    """What simulate_problem computed. `simulation` and `sigma`: (rows of the
    measurement table, sets); `nll`, `chi2`, `status`: one per set (member);
    `sets`: {parameterId: one linear-scale value per set}."""

    problem: PetabProblem
    sets: dict[str, np.ndarray]
    nll: np.ndarray
    chi2: np.ndarray
    status: np.ndarray
    #: {set: message} of every failed set (a dict, or petab.messages.FailureMessages)
    messages: Mapping[int, str] = field(default_factory=dict)
    #: the measurement rows whose simulated values and sigmas the host holds (all, or
    #: with `reduced_on_device` only those at t = inf), and those values (rows, sets)
    rows: np.ndarray | None = None
    simulated_rows: np.ndarray | None = None
    sigma_rows: np.ndarray | None = None
    #: the rows at finite times were scored on the device: no values came back
    reduced_on_device: bool = False
    #: the ode backend's integration method (None: another backend)
    method: str | None = None

    @property
    def simulation(self) -> np.ndarray:
        """(rows of the measurement table, sets); NaN at the rows scored on the device."""
        return self._full(self.simulated_rows)

    @property
    def sigma(self) -> np.ndarray:
        return self._full(self.sigma_rows)

    def _full(self, held: np.ndarray) -> np.ndarray:
        rows = len(self.problem.measurements)
        if self.rows is None or len(self.rows) == rows:
            return held
        out = np.full((rows, self.n_members), np.nan)
        out[self.rows] = held
        return out

    @property
    def n_members(self) -> int:
        return len(self.status)

    @property
    def nllh(self) -> np.ndarray:
        """The negative log-likelihood of every set (= nll)."""
        return self.nll

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


NON_FINITE_OBJECTIVE = Status.define(
    "non_finite_objective", "the simulations succeeded but the likelihood is not finite "
                            "(a simulated value outside a log transformation's domain, "
                            "or a noise sigma that is not positive)", code=PETAB_CODES + 1)
PARAMETER_NOT_FINITE = Status.define(
    "parameter_not_finite", "a parameter value of this set is NaN or infinite, so the set "
                            "was not scored: its runs took the nominal values in its "
                            "place, and its nllh, chi2 and simulated values are NaN",
    code=PETAB_CODES + 2)
