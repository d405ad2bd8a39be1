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


def estimate(data: Path, out: Path, ranks: int = 0, *extra: str) -> subprocess.CompletedProcess:
    command = [*SBMLGPU, "estimate", str(LV), "--data", str(data), "--unknown", "p2=-0.2:0.2",
               "--unknown", "p4=-0.2:0.2", "--epsilon", "0.004", "--presplit", "3",
               "--batch", "8", "--cpu", "--no-progress", "-o", str(out)]
    if ranks:
        command = [MPIRUN, "-n", str(ranks), *command, "--mpi"]
    command += list(extra)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.parametrize("ranks, balance", [(2, "dynamic"), (3, "dynamic"), (3, "static")])
def test_ranks_share_the_boxes_and_rank_0_writes_the_same_paving(tmp_path, ranks, balance):
    data = write_data(tmp_path / "lv.csv", "lv", np.linspace(0.02, 0.5, 25), {"x1": 4.0})
    # a static split shares out the start chunks: one box each, so that 3 ranks get some
    chunks = ("--batch", "1") if balance == "static" else ()
    alone = estimate(data, tmp_path / "one", 0, *chunks)
    assert alone.returncode == 0, alone.stderr
    shared = estimate(data, tmp_path / "mpi", ranks, "--balance", balance, *chunks)
    assert shared.returncode == 0, shared.stdout + shared.stderr
    assert shared.stdout.count("wrote ") == 2  # rank 0 only: the paving and its summary
    name = "lotka_volterra.paving.csv"
    assert (tmp_path / "mpi" / name).read_bytes() == (tmp_path / "one" / name).read_bytes()
    summary = dict(line.split(",", 1) for line in
                   (tmp_path / "mpi" / "lotka_volterra.paving.summary.csv").read_text()
                   .splitlines()[1:])
    assert summary["ranks"] == str(ranks) and summary["complete"] == "True"
    assert summary["balance"] == repr(balance)
    # every rank checked boxes (a static share each; the dynamic queue feeds all)
    ranks_busy = {key.split(".")[1].split(":")[0] for key in summary
                  if key.startswith("per_device.") and key.endswith(".chunks")}
    assert ranks_busy == {str(r) for r in range(ranks)}, summary
