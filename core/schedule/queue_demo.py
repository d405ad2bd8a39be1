"""The growing-queue self-check of `python -m sbmlgpu.schedule --queue` (see __main__).

The work is a small branch and bound: an interval of [0, 1] is split in two while
it is wider than 2**-depth and a zero of `curve` may lie inside it (as SIVIA
splits boxes it cannot decide). An item's result and children depend only on the
item, so the whole tree can be built here by plain recursion (`expected_tree`), and
rank 0 checks the scheduler's answer against it: every item once, with its result,
under the same id and in the same `ordered` order as one process gives. With a
budget, it checks that nothing was lost: the finished items that created nothing
and the items left queued tile [0, 1] exactly.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from typing import Any

from .growing import Finished, ItemId

Interval = tuple[float, float]


def curve(x: float) -> float:
    """A function with a few dozen zeros on [0, 1], unevenly spaced."""
    return math.sin(40.0 * x) + 0.6 * math.sin(97.0 * x + 0.3)


#: a bound on |curve'|: |curve(x)| > SLOPE * r means no zero within r of x
SLOPE = 40.0 + 0.6 * 97.0


def check_interval(item: Interval, depth: int) -> tuple[float, list[Interval]]:
    """(result, children) of one item: the curve at its middle; its two halves while
    it is wider than 2**-depth and may hold a zero of the curve."""
    lo, hi = item
    mid = 0.5 * (lo + hi)
    value = curve(mid)
    undecided = abs(value) <= SLOPE * (hi - lo) / 2
    split = undecided and hi - lo > 2.0 ** -depth
    return value, ([(lo, mid), (mid, hi)] if split else [])


def expected_tree(roots: list[Interval], depth: int) -> dict[ItemId, tuple[Interval, float, int]]:
    """Every item of the tree by id: (item, result, number of children)."""
    tree: dict[ItemId, tuple[Interval, float, int]] = {}
    stack: list[tuple[ItemId, Interval]] = [((i,), root) for i, root in enumerate(roots)]
    while stack:
        item_id, item = stack.pop()
        result, children = check_interval(item, depth)
        tree[item_id] = (item, result, len(children))
        stack.extend((item_id + (k,), child) for k, child in enumerate(children))
    return tree


def make_work(depth: int, seconds_per_item: float, fail: bool, unpicklable: bool = False):
    """work(device, items) for run_queue, sleeping `seconds_per_item` per item (a
    stand-in for a kernel), raising at once when `fail`; with `unpicklable`, results
    that cannot travel between ranks (a lock each)."""
    def work(device, items):
        if fail:
            raise RuntimeError("this rank was told to fail")
        time.sleep(seconds_per_item * len(items))
        checked = [check_interval(item, depth) for item in items]
        results = [threading.Lock() if unpicklable else result for result, _ in checked]
        return results, [children for _, children in checked]
    return work


def digest(done: list[Finished]) -> str:
    """A short fingerprint of (id, item, result) in the order given."""
    text = repr([(d.id, d.item, d.result) for d in done])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def check_complete(done: list[Finished], tree: dict) -> bool:
    """Every item of the tree, once, in id order, with its item and result."""
    wanted = [(item_id, tree[item_id][0], tree[item_id][1]) for item_id in sorted(tree)]
    return [(d.id, d.item, d.result) for d in done] == wanted


def check_cover(done: list[Finished], left: list[tuple[ItemId, Any]], tree: dict,
                span: Interval) -> bool:
    """After a budget stop: what finished and what is left are items of the tree with
    their results; each finished item's children finished or are left; and the
    finished items that created nothing, with the left ones, tile `span`."""
    finished = {d.id: d for d in done}
    left_ids = {item_id for item_id, _ in left}
    if len(finished) != len(done) or len(left_ids) != len(left) or finished.keys() & left_ids:
        return False
    if any(d.id not in tree or tree[d.id][:2] != (d.item, d.result) for d in done):
        return False
    if any(item_id not in tree or tree[item_id][0] != item for item_id, item in left):
        return False
    for d in done:
        children = [d.id + (k,) for k in range(tree[d.id][2])]
        if any(c not in finished and c not in left_ids for c in children):
            return False  # an item was lost
    pieces = sorted([d.item for d in done if tree[d.id][2] == 0] + [item for _, item in left])
    edges_meet = all(a[1] == b[0] for a, b in zip(pieces, pieces[1:]))
    return bool(pieces) and pieces[0][0] == span[0] and pieces[-1][1] == span[1] and edges_meet


def report(scheduler, done: list[Finished] | None, *, depth: int, span: Interval,
           budgeted: bool, roots: list[Interval] | None = None) -> dict:
    """What rank 0 prints: the checks and who ran how many items. `roots`: the start
    items when not `span` alone (they tile it)."""
    tree = expected_tree(roots or [span], depth)
    left = scheduler.last_queue_left or []
    per_rank: dict[int, int] = {}
    for record in scheduler.last_queue_batches:
        per_rank[record.rank] = per_rank.get(record.rank, 0) + record.items
    complete = check_complete(done, tree)
    covered = check_cover(done, left, tree, span)
    ok = covered if budgeted else complete and not left and scheduler.last_queue_stopped is None
    return {"ok": bool(ok), "ranks": scheduler.size, "mode": "queue", "tree": len(tree),
            "items": len(done), "items_per_rank": per_rank, "digest": digest(done),
            "left": len(left), "stopped": scheduler.last_queue_stopped,
            "complete": complete, "cover_ok": covered,
            "batches": len(scheduler.last_queue_batches)}
