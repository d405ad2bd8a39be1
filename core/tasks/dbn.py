"""DbnApproximation: a dynamic Bayesian network that approximates the ODE model's
behaviour over a sampled set of initial states and parameters (`sbmlgpu dbn`).

Sample N trajectories (initial values and parameters from distributions, Philox
keyed by seed and id, as `sbmlgpu run --sample`), integrate them with fixed steps
over `slices` intervals of `slice_time`, bin every variable and count conditional
probability tables (the built-in `dbn` backend: plugins/dbn, docs/dbn.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ..errors import OptionError
from ..results import DbnResult
from ..settings import interval, pair, setting
from .base import Task

if TYPE_CHECKING:  # pragma: no cover
    from ..ir import Network


@dataclass
class DbnApproximation(Task):
    kind: ClassVar[str] = "dbn"
    command: ClassVar[str] = "dbn"
    function: ClassVar[str] = "dbn"
    title: ClassVar[str] = "approximate a model by a dynamic Bayesian network"
    description: ClassVar[str] = (
        "Sample trajectories of MODEL from distributions of initial values and parameters, "
        "bin every variable at each time slice, and write the conditional probability "
        "tables of the resulting dynamic Bayesian network with its marginals.")
    result_class: ClassVar[type] = DbnResult
    #: the built-in method (plugins/dbn); another installed backend runs with --backend NAME
    default_backend: ClassVar[str | None] = "dbn"

    ensemble: int | None = setting(None, "number of sampled trajectories", minimum=1,
                                   required=True, metavar="N")
    sample: dict[str, str] = setting(
        {}, "sample an initial value or parameter from uniform:LOW:HIGH, "
            "loguniform:LOW:HIGH or normal:MEAN:SD[:LOW:HIGH] (repeatable)",
        parse=pair(str, "SPEC"), collect="dict", metavar="ID=SPEC")
    slices: int | None = setting(None, "number of time slices after the initial one",
                                 minimum=1, required=True, metavar="T")
    slice_time: float | None = setting(None, "time between two slices", minimum=0.0,
                                       required=True, metavar="t")
    steps: int = setting(10, "fixed integration steps per slice (step = slice-time / steps)",
                         minimum=1, metavar="r")
    bins: int = setting(5, "bins per variable", minimum=2, maximum=255, metavar="K")
    ranges: dict[str, tuple[float, float]] = setting(
        {}, "the value range cut into bins for one variable (repeatable) [default: min..max "
            "over all trajectories and slices]", parse=pair(interval, "LOW:HIGH"),
        collect="dict", metavar="ID=LOW:HIGH", flag="range")
    seed: int = setting(0, "seed of the random streams (Philox keyed by seed and SBML id)",
                        minimum=0)

    def check(self) -> None:
        from ..ensemble import parse_distribution

        if not self.slice_time > 0 or not math.isfinite(self.slice_time):
            raise OptionError("slice-time", f"{self.slice_time!r} must be a positive time")
        for sbml_id, spec in self.sample.items():
            parse_distribution(str(spec), option="sample")  # an OptionError naming the spec
        for sbml_id, (low, high) in dict(self.ranges).items():
            if not low < high:
                raise OptionError("range", f"{sbml_id}: [{low}, {high}] is empty")

    def check_network(self, network: "Network") -> None:
        from ..ensemble import check_ids, unknown_id_error

        check_ids(network, self.sample, option="sample")
        known = [*network.species_by_id, *network.parameter_by_id, *network.compartment_by_id]
        for sbml_id in self.ranges:
            if network.kind_of(sbml_id) is None:
                raise unknown_id_error("range", sbml_id, known, "a variable")
