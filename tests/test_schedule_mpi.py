"""The MPI path, run for real with `mpirun -n N python -m sbmlgpu.schedule` when mpi4py
and an mpirun are installed (skipped otherwise, with the reason)."""

from __future__ import annotations

import pytest

from .mpi_helpers import MPI_MISSING, mpirun, report

pytestmark = pytest.mark.skipif(MPI_MISSING is not None, reason=str(MPI_MISSING))


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
