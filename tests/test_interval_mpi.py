"""The interval backend's boxes shared between MPI ranks on the CPU path, run for real
under mpirun (skipped without mpi4py or an mpirun, decided at collection): the paving
written by rank 0 is the one a single process writes, byte for byte (each chunk's
decision depends on the chunk alone, and the queue orders results by item id)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from .interval_fixtures import LV, write_data
from .mpi_helpers import MPI_MISSING, MPIRUN

pytestmark = pytest.mark.skipif(MPI_MISSING is not None, reason=str(MPI_MISSING))
SBMLGPU = [sys.executable, "-m", "sbmlgpu"]


def estimate(data: Path, out: Path, ranks: int = 0) -> subprocess.CompletedProcess:
    command = [*SBMLGPU, "estimate", str(LV), "--data", str(data), "--unknown", "p2=-0.2:0.2",
               "--unknown", "p4=-0.2:0.2", "--epsilon", "0.004", "--presplit", "3",
               "--batch", "8", "--cpu", "--no-progress", "-o", str(out)]
    if ranks:
        command = [MPIRUN, "-n", str(ranks), *command, "--mpi"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.parametrize("ranks", [2, 3])
def test_ranks_share_the_boxes_and_rank_0_writes_the_same_paving(tmp_path, ranks):
    data = write_data(tmp_path / "lv.csv", "lv", np.linspace(0.02, 0.5, 25), {"x1": 4.0})
    alone = estimate(data, tmp_path / "one")
    assert alone.returncode == 0, alone.stderr
    shared = estimate(data, tmp_path / "mpi", ranks)
    assert shared.returncode == 0, shared.stdout + shared.stderr
    assert shared.stdout.count("wrote ") == 2  # rank 0 only: the paving and its summary
    name = "lotka_volterra.paving.csv"
    assert (tmp_path / "mpi" / name).read_bytes() == (tmp_path / "one" / name).read_bytes()
    summary = dict(line.split(",", 1) for line in
                   (tmp_path / "mpi" / "lotka_volterra.paving.summary.csv").read_text()
                   .splitlines()[1:])
    assert summary["ranks"] == str(ranks) and summary["complete"] == "True"
