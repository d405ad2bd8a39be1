"""Every problem of the PEtab benchmark collection in ../shared/models/petab-benchmark
against its own simulatedData table, on the ode backend's CPU path.

Each folder is listed in EXPECTED with what must happen, so that a new refusal, a
new mismatch or a new folder fails:

- MATCH: every measurement row's simulation agrees with the simulatedData row of the
  same observable, conditions, time and overrides:
  |ours - theirs| <= RTOL * |theirs| + ATOL_FRACTION * (the largest |theirs| of that
  observable) -- the absolute floor is relative to the observable's own scale, for
  values that cross zero or decay to nothing (solver noise near 0 is not an error).
- NO_REFERENCE: the folder has no simulatedData table; every run must succeed with
  finite values, and the likelihood must equal petab's.
- a refusal: simulate_problem raises the typed error whose message contains the text.
- REFERENCE_DIFFERS: the simulatedData table does not follow the problem's own
  condition table; the test asserts precisely how (see the entry).

Where the measurement table is small enough for petab's row-by-row calculate_llh
(LLH_ROWS), our log-likelihood must equal it on our simulations.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import pytest

from tests.shared_data import MODELS, parameters

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning",
                                        "ignore::UserWarning")
petab = pytest.importorskip("petab.v1", reason="the petab extra is not installed")
pd = pytest.importorskip("pandas")

BENCHMARK = MODELS / "petab-benchmark"
RTOL = 1e-3
ATOL_FRACTION = 1e-6
LLH_ROWS = 700

MATCH = "match"
NO_REFERENCE = "no simulatedData table"
REFERENCE_DIFFERS = "reference differs"

EXPECTED = {
    "Alkan_SciSignal2018": MATCH,
    # the simulatedData rows of condition `mutant` are the `wild_type` simulations
    # (S_on and the initial concentrations of the mutant condition are ignored there):
    # wild_type rows match, and mutant rows equal our wild_type simulation
    "Armistead_CellDeathDis2024": REFERENCE_DIFFERS,
    "Bachmann_MSB2011": MATCH,
    "Beer_MolBioSystems2014": MATCH,
    "Blasi_CellSystems2016": MATCH,
    "Boehm_JProteomeRes2014": MATCH,
    "Borghans_BiophysChem1997": MATCH,
    "Brannmark_JBC2010": MATCH,
    "Chen_MSB2009": MATCH,
    "Crauste_CellSystems2017": MATCH,
    "Elowitz_Nature2000": MATCH,
    "Fiedler_BMCSystBiol2016": MATCH,
    "Fujita_SciSignal2010": MATCH,
    "Giordano_Nature2020": MATCH,
    "Isensee_JCB2018": MATCH,
    "Lang_PLOSComputBiol2024": MATCH,
    "Liu_IFACPapersOnLine2025": MATCH,
    "Lucarelli_CellSystems2018": MATCH,
    "Okuonghae_ChaosSolitonsFractals2020": NO_REFERENCE,
    "Oliveira_NatCommun2021": NO_REFERENCE,
    "Rahman_MBS2016": MATCH,
    "Raia_CancerResearch2011": MATCH,
    "Raimundez_PCB2020": MATCH,
    "SalazarCavazos_MBoC2020": MATCH,
    "Smith_BMCSystBiol2013": MATCH,
    "Sneyd_PNAS2002": MATCH,
    "Weber_BMC2015": MATCH,
    "Zhao_QuantBiol2020": MATCH,
}

FOUND = sorted(p.name for p in BENCHMARK.iterdir() if p.is_dir()) if BENCHMARK.is_dir() else []
KEYS = ("observableId", "preequilibrationConditionId", "simulationConditionId", "time",
        "observableParameters", "noiseParameters")


def test_every_benchmark_folder_is_listed():
    if not FOUND:
        pytest.skip(f"no PEtab benchmark at {BENCHMARK}")
    assert sorted(EXPECTED) == FOUND


@lru_cache(maxsize=None)
def simulated(name: str):
    from sbmlgpu.petab import simulate_problem

    return simulate_problem(BENCHMARK / name / f"{name}.yaml", device="cpu")


def _text(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return f"{value:.10g}" if isinstance(value, float) else str(value).strip()


def _keys(df, columns) -> list[str]:
    parts = []
    for c in columns:
        if c not in df.columns:
            parts.append([""] * len(df))
        elif c == "time":
            parts.append([f"{float(t):.10g}" for t in df[c]])
        else:
            parts.append([_text(v) for v in df[c]])
    return ["|".join(t) for t in zip(*parts)]


def reference(name: str, ours) -> np.ndarray:
    """The simulatedData value of every row of our simulation table (NaN: none)."""
    path = next((BENCHMARK / name).glob("simulatedData*.tsv"))
    ref = pd.read_csv(path, sep="\t")
    columns = [c for c in KEYS if c in ref.columns or c in ours.columns]
    values = dict(zip(_keys(ref, columns), ref["simulation"].astype(float)))
    return np.array([values.get(k, np.nan) for k in _keys(ours, columns)])


def within(ours: np.ndarray, theirs: np.ndarray, observables: np.ndarray) -> np.ndarray:
    scale = {o: np.nanmax(np.abs(theirs[observables == o])) for o in set(observables)}
    floor = ATOL_FRACTION * np.array([scale[o] for o in observables])
    return np.abs(ours - theirs) <= RTOL * np.abs(theirs) + floor


def check_llh(result) -> None:
    p = result.problem.problem
    if len(p.measurement_df) > LLH_ROWS:
        return
    llh = petab.calculate_llh(p.measurement_df, result.simulation_df(0), p.observable_df,
                              p.parameter_df)
    assert result.llh == pytest.approx(llh, rel=1e-9, abs=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("name", parameters(FOUND, BENCHMARK, "PEtab benchmark problems"))
def test_benchmark_problem(name):
    expected = EXPECTED.get(name)
    assert expected is not None, f"{name} is not listed in EXPECTED"
    if expected not in (MATCH, NO_REFERENCE, REFERENCE_DIFFERS):
        from sbmlgpu.errors import OptionError, UnsupportedModelError

        with pytest.raises((UnsupportedModelError, OptionError), match=expected):
            simulated(name)
        return
    result = simulated(name)
    assert result.failures() == []
    ours = result.simulation[:, 0]
    assert np.all(np.isfinite(ours))
    check_llh(result)
    if expected == NO_REFERENCE:
        assert not list((BENCHMARK / name).glob("simulatedData*.tsv"))
        return
    table = result.simulation_df(0)
    theirs = reference(name, table)
    assert not np.isnan(theirs).any(), "rows without a simulatedData row"
    observables = table["observableId"].to_numpy()
    ok = within(ours, theirs, observables)
    if expected == MATCH:
        worst = int(np.argmax(np.abs(ours - theirs) / np.maximum(np.abs(theirs), 1e-300)))
        assert ok.all(), (f"{(~ok).sum()} of {len(ok)} rows differ; worst row {worst}: "
                          f"{ours[worst]!r} vs {theirs[worst]!r}")
        return
    # REFERENCE_DIFFERS (Armistead): wild_type rows match; mutant rows are wild_type's
    conditions = table["simulationConditionId"].to_numpy()
    assert ok[conditions == "wild_type"].all()
    assert not ok[conditions == "mutant"].all()
    wild = {(o, float(t)): v for o, t, v, c in zip(observables, table["time"], ours, conditions)
            if c == "wild_type"}
    mutant = np.flatnonzero(conditions == "mutant")
    as_wild = np.array([wild[(observables[r], float(table["time"].iloc[r]))] for r in mutant])
    assert within(as_wild, theirs[mutant], observables[mutant]).all()
