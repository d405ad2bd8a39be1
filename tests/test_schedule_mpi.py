"""The MPI path, run for real with `mpirun -n N python -m sbmlgpu.schedule` when mpi4py
and an mpirun are installed (skipped otherwise, with the reason)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest


def _mpi_missing() -> str | None:
    try:
        import mpi4py  # noqa: F401  (only the package: MPI itself starts in the children)
    except ImportError as exc:
        return f"mpi4py is not importable ({exc})"
    if shutil.which("mpirun") is None:
        return "no mpirun on PATH"
    # the MPI library behind mpi4py may still be missing; try it away from this process
    probe = subprocess.run([sys.executable, "-c", "from mpi4py import MPI"],
                           capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        return f"mpi4py.MPI does not load: {probe.stderr.strip().splitlines()[-1:]}"
    return None


MPI_MISSING = _mpi_missing()


pytestmark = pytest.mark.skipif(MPI_MISSING is not None, reason=str(MPI_MISSING))


def mpirun(ranks: int, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    # Open MPI refuses root and more ranks than cores unless told; MPICH ignores these
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    command = ["mpirun", "-n", str(ranks), sys.executable, "-m", "sbmlgpu.schedule", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)


def report(done: subprocess.CompletedProcess) -> dict:
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0 and len(lines) == 1, done.stdout + done.stderr
    return json.loads(lines[0])


def test_dynamic_queue_gathers_all_items_in_order_and_balances():
    out = report(mpirun(2, "--items", "20000", "--max-batch-items", "500", "--slow-rank", "1"))
    assert out["ok"] and out["ranks"] == 2 and out["mode"] == "dynamic"
    per_rank = {int(k): v for k, v in out["items_per_rank"].items()}
    assert sum(per_rank.values()) == 20000
    assert per_rank.get(1, 0) > 0, "rank 1 got no work"
    assert per_rank[0] > 2 * per_rank[1], "the fast rank should take more batches"


def test_static_blocks_gather_all_items_in_order():
    out = report(mpirun(3, "--items", "10000", "--mode", "static"))
    assert out["ok"] and out["ranks"] == 3
    assert {int(k): v for k, v in out["items_per_rank"].items()} == {0: 3334, 1: 3333, 2: 3333}


@pytest.mark.parametrize("mode", ["dynamic", "static"])
def test_a_failing_rank_stops_every_rank_with_its_error(mode):
    done = mpirun(2, "--items", "5000", "--fail-rank", "1", "--mode", mode, timeout=60)
    assert done.returncode != 0
    assert "rank 1 was told to fail" in done.stderr
    assert "MPI rank 1" in done.stderr  # rank 0 names the rank that failed
