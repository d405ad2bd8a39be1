"""run_queue across MPI ranks, run for real with `mpirun -n N python -m sbmlgpu.schedule
--queue` (a tree of bisected intervals that rank 0 checks against the tree built by
recursion; core/schedule/queue_demo.py). Skipped without mpi4py or an mpirun."""

from __future__ import annotations

import re

import pytest

from .mpi_helpers import MPI_MISSING, mpirun, report

pytestmark = pytest.mark.skipif(MPI_MISSING is not None, reason=str(MPI_MISSING))

#: a tree of 803 items (depth 14) at 1 ms each: about a second on one rank
TREE = ("--queue", "--depth", "14", "--seconds-per-item", "0.001", "--max-batch-items", "8")


def per_rank(out: dict) -> dict[int, int]:
    return {int(k): v for k, v in out["items_per_rank"].items()}


@pytest.fixture(scope="module")
def one_process() -> dict:
    out = report(mpirun(1, *TREE))
    assert out["ok"] and out["ranks"] == 1 and out["complete"]
    return out


@pytest.mark.parametrize("ranks", [2, 3])
def test_every_rank_works_and_rank_0_gets_what_one_process_gets(ranks, one_process):
    out = report(mpirun(ranks, *TREE))
    # ok/complete: every item of the tree once, with its result, sorted by id
    assert out["ok"] and out["complete"] and out["ranks"] == ranks
    assert out["digest"] == one_process["digest"]  # same ids, items, results and order
    assert out["items"] == out["tree"] == one_process["items"]
    assert out["left"] == 0 and out["stopped"] is None
    counts = per_rank(out)
    assert sum(counts.values()) == out["tree"]
    assert set(counts) == set(range(ranks)), f"a rank got no work: {counts}"


@pytest.mark.parametrize("ranks, slow", [(2, 1), (3, 2)])
def test_a_slow_rank_takes_fewer_items(ranks, slow):
    out = report(mpirun(ranks, *TREE, "--slow-rank", str(slow)))
    assert out["ok"] and out["complete"]
    counts = per_rank(out)
    fast = min(n for rank, n in counts.items() if rank != slow)
    assert counts.get(slow, 0) < fast / 2, counts


@pytest.mark.parametrize("ranks, failing", [(2, 1), (3, 2), (3, 0)])
def test_a_failure_on_one_rank_raises_on_every_rank(ranks, failing):
    done = mpirun(ranks, *TREE, "--fail-rank", str(failing), timeout=60)
    assert done.returncode != 0
    # the failing rank raises its own error; every other rank names it (the ranks'
    # lines may run into each other in mpirun's stderr, so no line boundaries)
    assert f"rank {failing}: RuntimeError: this rank was told to fail" in done.stderr
    for rank in set(range(ranks)) - {failing}:
        assert re.search(rf"rank {rank}: error: MPI rank {failing} \([^)]*\) failed: "
                         "RuntimeError: this rank was told to fail", done.stderr), done.stderr
    assert not done.stdout.strip(), "rank 0 must not report a result"


def test_the_queue_limit_raises_on_every_rank():
    done = mpirun(2, *TREE, "--limit", "100", timeout=60)
    assert done.returncode != 0
    for rank in (0, 1):
        assert re.search(rf"rank {rank}: error: [^\n]*grew past its limit of 100 items",
                         done.stderr), done.stderr


def test_an_item_budget_stops_all_ranks_and_loses_nothing():
    out = report(mpirun(3, *TREE, "--budget-items", "300"))
    # cover_ok: finished and left items are the tree's, each finished item's children
    # finished or are left, and the leaves with the left items tile [0, 1]
    assert out["ok"] and out["cover_ok"] and not out["complete"]
    assert out["items"] == 300 and sum(per_rank(out).values()) == 300
    assert out["left"] > 0 and out["stopped"] == "the budget of 300 items was taken"


def test_a_time_budget_stops_all_ranks_and_loses_nothing():
    out = report(mpirun(2, "--queue", "--depth", "14", "--seconds-per-item", "0.002",
                        "--max-batch-items", "8", "--budget-seconds", "0.3"))
    assert out["ok"] and out["cover_ok"] and not out["complete"]
    assert 0 < out["items"] < out["tree"] and out["left"] > 0
    assert out["stopped"] == "the budget of 0.3 seconds ran out"


def test_without_a_helper_thread_rank_0_only_serves():
    done = mpirun(2, *TREE, "--no-threads")
    out = report(done)
    assert out["ok"] and out["complete"]
    assert per_rank(out) == {1: out["tree"]}
    assert "rank 0 only hands out the work queue" in done.stderr


#: the static split needs several start items: six pieces of [0, 1]
STARTS = TREE + ("--starts", "6")


@pytest.mark.parametrize("ranks", [2, 3])
def test_a_static_split_gives_every_rank_its_share_and_rank_0_the_same_tree(ranks):
    one = report(mpirun(1, *STARTS))
    out = report(mpirun(ranks, *STARTS, "--balance", "static"))
    assert one["ok"] and out["ok"] and out["complete"] and out["balance"] == "static"
    assert out["digest"] == one["digest"] and out["items"] == out["tree"]
    counts = per_rank(out)
    assert set(counts) == set(range(ranks)) and sum(counts.values()) == out["tree"]


def test_a_failure_in_a_static_share_raises_on_every_rank():
    done = mpirun(3, *STARTS, "--balance", "static", "--fail-rank", "1", timeout=60)
    assert done.returncode != 0
    assert "rank 1: RuntimeError: this rank was told to fail" in done.stderr
    for rank in (0, 2):
        assert re.search(rf"rank {rank}: error: MPI rank 1 \([^)]*\) failed: "
                         r"RuntimeError: this rank was told to fail", done.stderr), done.stderr


def test_static_results_that_cannot_travel_are_that_ranks_error_not_a_hang():
    done = mpirun(2, *STARTS, "--balance", "static", "--unpicklable-rank", "1", timeout=60)
    assert done.returncode != 0
    assert "cannot be sent to rank 0" in done.stderr, done.stderr
