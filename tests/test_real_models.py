"""Real models from ../shared/models: every one loads and simulates with the CPU
reference at its nominal parameters (PEtab parameter table, linear-scale nominal
values; the model's own default condition), or is refused with a typed reason.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

import sbmlgpu
from sbmlgpu import reference
from sbmlgpu.ensemble import read_petab_parameters
from sbmlgpu.errors import SbmlGpuError
from sbmlgpu.views import ode_system

from .shared_data import MODELS, needs_models, parameters

PETAB = sorted(p for p in (MODELS / "petab-benchmark").glob("*") if p.is_dir())
BIOMODELS = sorted((MODELS / "biomodels").glob("*.xml"))


def _last_measurement_time(folder: Path) -> float:
    times = []
    for table in folder.glob("measurement*.tsv"):
        with open(table) as f:
            for row in csv.DictReader(f, delimiter="\t"):
                t = row.get("time", "")
                if t not in ("", "inf"):
                    times.append(float(t))
    return max(times) if times else 10.0


def _simulate_or_refuse(model_file: Path, end: float, nominal: dict[str, float]):
    try:
        net = sbmlgpu.load(model_file)
        ode = ode_system(net)
    except SbmlGpuError as exc:  # a typed refusal is an acceptable outcome
        return "refused", str(exc)
    chosen = {k: v for k, v in nominal.items() if k in ode.p_ids}
    traj = reference.simulate(ode, np.linspace(0.0, end, 41), parameters=chosen)
    return traj.status, traj


@pytest.mark.slow
@pytest.mark.parametrize("folder", parameters(PETAB, MODELS / "petab-benchmark",
                                              "PEtab benchmark problems"),
                         ids=lambda p: getattr(p, "name", None))
def test_petab_model_simulates_at_nominal_parameters(folder):
    tables = list(folder.glob("parameters*.tsv"))
    nominal = {p.id: p.nominal for p in read_petab_parameters(tables[0])} if tables else {}
    model_files = sorted(folder.glob("*.xml"))  # some problems ship model variants
    assert model_files
    for model_file in model_files:
        status, traj = _simulate_or_refuse(model_file, _last_measurement_time(folder), nominal)
        if status == "refused":
            assert traj  # the reason
            continue
        assert status == "ok", f"{model_file.name}: {traj.message}"
        assert np.all(np.isfinite(traj.x)), model_file.name


@pytest.mark.parametrize("model_file", parameters(BIOMODELS, MODELS / "biomodels",
                                                  "BioModels"),
                         ids=lambda p: getattr(p, "stem", None))
def test_biomodels_simulate(model_file):
    status, traj = _simulate_or_refuse(model_file, 100.0, {})
    assert status == "ok", getattr(traj, "message", traj)
    assert np.all(np.isfinite(traj.x))


@needs_models
def test_shared_models_present_or_skipped():
    assert PETAB and BIOMODELS
