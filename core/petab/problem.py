"""Reading a PEtab v1 problem: the YAML with `petab.v1.Problem.from_yaml`, its SBML
model with our importer, and the checks that turn what we do not support into typed
refusals (UnsupportedModelError / OptionError naming the file and what is missing)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..ensemble import PetabParameter, read_petab_parameters
from ..errors import OptionError, SbmlGpuError, UnsupportedModelError
from ..ir import Network

OPTION = "problem"
TRANSFORMATIONS = ("lin", "log", "log10")
DISTRIBUTIONS = ("normal", "laplace")


def petab_v1():
    """The petab library's v1 module, imported only when a PEtab problem is read."""
    try:
        import petab.v1 as v1
    except ImportError:
        raise OptionError("petab", "reading PEtab problems needs the petab package: "
                                   "pip install 'sbmlgpu[petab]'") from None
    return v1


@dataclass
class PetabProblem:
    """A PEtab problem as we run it: the petab library's Problem (its tables), our
    Network of its SBML model and its parameter table (core/ensemble.py's reader)."""

    path: Path
    problem: Any  # petab.v1.Problem
    network: Network
    parameters: list[PetabParameter]

    @property
    def measurements(self):
        return self.problem.measurement_df

    @property
    def nominal(self) -> dict[str, float]:
        """{parameterId: nominal value on the linear scale} (PEtab's convention)."""
        return {p.id: p.nominal for p in self.parameters}

    def refuse(self, feature: str, ids=()) -> UnsupportedModelError:
        return UnsupportedModelError({feature: tuple(ids)}, who=f"sbmlgpu petab ({self.path})")


def load_problem(path: str | Path) -> PetabProblem:
    """Load PROBLEM.yaml and check that we can simulate it (typed errors otherwise)."""
    v1 = petab_v1()
    path = Path(path)
    if not path.is_file():
        raise OptionError(OPTION, f"{path}: no such file")
    config = _read_yaml(v1, path)
    if "format_version" not in config or "problems" not in config:
        raise OptionError(OPTION, f"{path}: not a PEtab problem (a PEtab YAML has "
                                  f"format_version and problems)")
    if str(config["format_version"]).split(".")[0] != "1":
        raise UnsupportedModelError({f"PEtab format_version {config['format_version']} "
                                     f"(only PEtab v1 problems are read)": ()},
                                    who=f"sbmlgpu petab ({path})")
    problems = config.get("problems") or []
    if len(problems) != 1:
        raise UnsupportedModelError({f"{len(problems)} problems in one YAML (one is read)": ()},
                                    who=f"sbmlgpu petab ({path})")
    entry = problems[0]
    for key in ("sbml_files", "condition_files", "measurement_files", "observable_files"):
        if not entry.get(key):
            raise OptionError(OPTION, f"{path}: the problem lists no {key}")
    if len(entry["sbml_files"]) != 1:
        raise UnsupportedModelError({f"{len(entry['sbml_files'])} SBML models in one problem "
                                     f"(one is simulated)": tuple(entry["sbml_files"])},
                                    who=f"sbmlgpu petab ({path})")
    if entry.get("mapping_files"):
        raise UnsupportedModelError({"PEtab mapping tables": tuple(entry["mapping_files"])},
                                    who=f"sbmlgpu petab ({path})")
    base = path.parent
    for key in ("sbml_files", "condition_files", "measurement_files", "observable_files"):
        for name in entry[key]:
            if not (base / name).is_file():
                raise OptionError(OPTION, f"{path}: {key} names {name}, which is not a file "
                                          f"in {base}")
    parameter_file = base / str(config.get("parameter_file") or "")
    if not config.get("parameter_file") or not parameter_file.is_file():
        raise OptionError(OPTION, f"{path}: the problem's parameter_file "
                                  f"{config.get('parameter_file')!r} is not a file")
    try:
        problem = v1.Problem.from_yaml(str(path))
    except SbmlGpuError:
        raise
    except Exception as exc:  # noqa: BLE001 - the library's own words, typed
        raise OptionError(OPTION, f"{path}: petab could not read the problem: "
                                  f"{type(exc).__name__}: {exc}") from None
    from .. import load

    network = load(str(base / entry["sbml_files"][0]))
    parameters = read_petab_parameters(parameter_file, option=OPTION)
    loaded = PetabProblem(path, problem, network, parameters)
    check_supported(loaded)
    return loaded


def _read_yaml(v1, path: Path) -> dict:
    try:
        config = v1.yaml.load_yaml(str(path))
    except Exception as exc:  # noqa: BLE001 - a YAML syntax error, typed
        raise OptionError(OPTION, f"{path}: not a readable YAML file ({type(exc).__name__}: "
                                  f"{str(exc).splitlines()[0] if str(exc) else ''})") from None
    if not isinstance(config, dict):
        raise OptionError(OPTION, f"{path}: not a PEtab problem (the YAML is not a mapping)")
    return config


#: the measurement table's columns PEtab v1 requires
MEASUREMENT_COLUMNS = ("observableId", "simulationConditionId", "time", "measurement")


def check_measurements(p: PetabProblem) -> None:
    """OptionError naming the column and rows where the measurement table lacks a
    required column or holds a time or measurement that is not a number (petab reads
    the table as text where one cell is; the simulation would raise KeyError or
    ValueError, or score a NaN)."""
    import pandas as pd

    meas = p.problem.measurement_df
    missing = [c for c in MEASUREMENT_COLUMNS if c not in meas.columns]
    if missing:
        raise OptionError(OPTION, f"{p.path}: the measurement table has no column "
                                  f"{', '.join(missing)} (PEtab v1 needs "
                                  f"{', '.join(MEASUREMENT_COLUMNS)})")
    if not len(meas):  # a log-likelihood of -0 was written for a table of a header only
        raise OptionError(OPTION, f"{p.path}: the measurement table has no rows")
    for column in ("time", "measurement"):
        values = pd.to_numeric(meas[column], errors="coerce")
        bad = np.flatnonzero(values.isna().to_numpy()
                             | (column == "measurement") & ~np.isfinite(values.to_numpy(float)))
        if bad.size:
            # rows as numbered in the file: the header is line 1
            shown = ", ".join(f"line {i + 2} ({_cell(meas[column].iloc[i])})" for i in bad[:5])
            more = f" and {bad.size - 5} more" if bad.size > 5 else ""
            raise OptionError(OPTION, f"{p.path}: the measurement table's {column} column "
                                      f"holds {'a value' if bad.size == 1 else 'values'} that "
                                      f"{'is' if bad.size == 1 else 'are'} not "
                                      f"{'a number' if column == 'time' else 'a finite number'}"
                                      f": {shown}{more}")
        meas[column] = values


def _cell(value) -> str:
    """A table cell as the file has it: text quoted, an empty cell named."""
    if isinstance(value, str):
        return repr(value)
    value = float(value)
    return "empty or NaN" if math.isnan(value) else f"{value:g}"


def check_supported(p: PetabProblem) -> None:
    """Refuse (typed, naming the file and what) what `simulate` does not implement."""
    check_measurements(p)
    obs = p.problem.observable_df
    meas = p.problem.measurement_df
    for column, allowed in (("observableTransformation", TRANSFORMATIONS),
                            ("noiseDistribution", DISTRIBUTIONS)):
        if column in obs.columns:
            values = obs[column].fillna("").astype(str)
            bad = sorted({v for v in values if v and v not in allowed})
            if bad:
                ids = [i for i, v in zip(obs.index, values) if v in bad]
                raise p.refuse(f"{column} {', '.join(bad)} (allowed: {', '.join(allowed)})",
                               ids)
    unknown = sorted(set(meas["observableId"]) - set(obs.index))
    if unknown:
        raise OptionError(OPTION, f"{p.path}: the measurement table uses observables the "
                                  f"observable table does not define: {', '.join(unknown)}")
    conditions = set(p.problem.condition_df.index)
    used = set(meas["simulationConditionId"])
    if "preequilibrationConditionId" in meas.columns:
        used |= {c for c in meas["preequilibrationConditionId"] if isinstance(c, str) and c}
    missing = sorted(used - conditions)
    if missing:
        raise OptionError(OPTION, f"{p.path}: the measurement table uses conditions the "
                                  f"condition table does not define: {', '.join(missing)}")
    times = np.asarray(meas["time"], dtype=float)
    if np.any(np.isnan(times)) or np.any(times < 0):
        raise OptionError(OPTION, f"{p.path}: measurement times must be numbers >= 0 "
                                  f"(or inf for a steady state)")
    for parameter in p.parameters:
        if not math.isfinite(parameter.nominal) and parameter.estimate:
            raise OptionError(OPTION, f"{p.path}: parameter {parameter.id} has no nominalValue; "
                                      f"the nominal run needs one")


def from_petab_problem(problem, name: str = "<petab.v1.Problem>") -> PetabProblem:
    """A PetabProblem from a loaded petab.v1.Problem (its SBML document and
    parameter table; core/ensemble.py reads the table's rows)."""
    from .. import load
    from ..ensemble import _petab_row

    document = getattr(getattr(problem, "model", None), "sbml_document", None)
    if document is None or problem.parameter_df is None:
        raise OptionError(OPTION, f"{name}: needs an SBML model and a parameter table")
    table = problem.parameter_df.reset_index()
    rows = [{k: "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)
             for k, v in row.items()} for row in table.to_dict("records")]
    parameters = [_petab_row(row, f"{name}, parameter table row {i + 2}", OPTION)
                  for i, row in enumerate(rows)]
    loaded = PetabProblem(Path(name), problem, load(document), parameters)
    check_supported(loaded)
    return loaded
