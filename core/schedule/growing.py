"""Work that grows while it runs: branch and bound over a shared queue.

Interval estimation (SIVIA) starts from one box of parameters; each box checked is
feasible, infeasible, or split in two, and how many boxes there will be is known
only at the end. `map_batches` needs the number of items up front, so this is the
other shape of work a backend can hand the scheduler:

    def work(device, boxes):                    # a batch taken from the queue
        verdicts = check_on_gpu(device, boxes)
        return verdicts, [halves(b) if v == UNDECIDED else [] for b, v in zip(boxes, verdicts)]

    done = scheduler.run_queue(work, [initial_box], bytes_per_item=...)
    for item in done: item.id, item.item, item.result

`work(device, items)` returns `(results, new_items)`: `results[i]` is items[i]'s
result and `new_items[i]` the items it creates (an iterable, empty for none;
`new_items` None when no item creates any). Every device (one thread per local GPU,
or the host) takes batches from one queue and pushes what it creates back; the run
ends when the queue is empty and no worker holds items, since a worker that holds
items may still create more (so an idle worker waits rather than stops).

Ids say where an item came from: initial item i is (i,), and the k-th item created
by item p is p + (k,). They do not depend on which device ran what or when, so
sorting by id (`ordered=True`) gives the same order on every run and any number of
devices: depth-first, each item before the items it created.

A budget stops a run early without losing anything: `budget_items` (hand out no
more items once this many were taken) and `budget_seconds` (none after this long).
Items already taken still finish and push what they create, so the run ends with
every item either finished or still queued; `left()` gives the queued ones, from
which a later run can go on. The `limit` is different: a guard against work that
never stops creating items, it raises SimulationError.

Across MPI ranks the same queue lives on rank 0 and a helper thread answers the
other ranks (growing_mpi.py).
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from ..errors import OptionError, SimulationError
from ..runtime.base import Device
from .mpi import static_block
from .worker import DeviceWorker

#: an item's place in the tree of items: (i,) for initial item i, p + (k,) for the
#: k-th item that item p created
ItemId = tuple[int, ...]
#: work(device, items) -> (results, new_items); see the module docstring
QueueWork = Callable[["Device | None", list], tuple[Sequence, "Sequence[Iterable] | None"]]
#: what `GrowingQueue.take(..., wait=False)` returns when it would have waited
WAIT = "wait"
#: fifo: breadth first (the frontier grows and batches fill the GPU);
#: lifo: depth first (the queue stays small)
ORDERS = ("fifo", "lifo")


@dataclass(frozen=True)
class Finished:
    """One item that was worked on, with what it gave."""

    id: ItemId
    item: Any
    result: Any


@dataclass(frozen=True)
class QueueBatchRecord:
    """What ran where: one finished batch of queued items."""

    device_index: int | None  # None: the host (no GPU)
    device_name: str
    rank: int
    items: int
    new_items: int
    seconds: float
    out_of_memory_sizes: tuple[int, ...] = ()  # sizes that failed on the way to this one


class GrowingQueue:
    """Thread-safe queue of (id, item) that workers take batches from and push new
    items into. `take` waits while the queue is empty but a worker holds items.

    budget_items / budget_seconds: hand out nothing more once this many items were
    taken / this many seconds after the queue was made; `stopped_by` then says
    which budget stopped it, and `left()` what it left."""

    def __init__(self, items: Iterable[Any], *, order: str = "fifo", workers: int = 1,
                 limit: int | None = None, budget_items: int | None = None,
                 budget_seconds: float | None = None,
                 entries: Iterable[tuple[ItemId, Any]] | None = None):
        """`entries`: (id, item) pairs to start from instead of `items` (which then
        get the ids (0,), (1,), ...): a share of a larger run keeps that run's ids."""
        self._entries: deque = deque(entries) if entries is not None else \
            deque(((i,), item) for i, item in enumerate(items))
        self._lifo = order == "lifo"
        self._workers = max(int(workers), 1)
        self._limit = limit
        self._budget_items = budget_items
        self._deadline = None if budget_seconds is None else time.monotonic() + budget_seconds
        self._budget_seconds = budget_seconds
        self._cond = threading.Condition()
        self._closed = False
        self.in_flight = 0  # items taken and not finished
        self.done = 0
        self.taken = 0
        self.created = len(self._entries)  # every item ever queued
        self.stopped_by: str | None = None  # the budget that stopped the run, if one did

    @property
    def queued(self) -> int:
        with self._cond:
            return len(self._entries)

    def take(self, max_items: int, *, wait: bool = True) -> list[tuple[ItemId, Any]] | None | str:
        """Up to `max_items` entries (fewer with several workers, so that each gets a
        share of a short queue); None when all work is done, the queue is closed or a
        budget is spent. Without `wait`, WAIT instead of waiting for held items."""
        with self._cond:
            while not self._closed:
                if not self._entries and self.in_flight == 0:
                    return None
                if self._over_budget():
                    return None
                if self._entries:
                    count = min(max(max_items, 1), len(self._entries))
                    if self._workers > 1:
                        count = min(count, math.ceil(len(self._entries) / self._workers))
                    if self._budget_items is not None:
                        count = min(count, self._budget_items - self.taken)
                    pop = self._entries.pop if self._lifo else self._entries.popleft
                    batch = [pop() for _ in range(count)]
                    self.in_flight += count
                    self.taken += count
                    return batch
                if not wait:
                    return WAIT
                self._cond.wait()
            return None

    def _over_budget(self) -> bool:
        """True (and `stopped_by` set) once a budget forbids handing out more."""
        if self._budget_items is not None and self.taken >= self._budget_items:
            self.stopped_by = f"the budget of {self._budget_items} items was taken"
        elif self._deadline is not None and time.monotonic() >= self._deadline:
            self.stopped_by = f"the budget of {self._budget_seconds:g} seconds ran out"
        return self.stopped_by is not None

    def finish(self, count: int, new_entries: list[tuple[ItemId, Any]]) -> None:
        """`count` taken items are done and created `new_entries`."""
        with self._cond:
            self.in_flight -= count
            self.done += count
            self.created += len(new_entries)
            if self._limit is not None and self.created > self._limit:
                self._closed = True
                self._cond.notify_all()
                raise SimulationError(
                    f"the work queue grew past its limit of {self._limit} items "
                    f"({self.done} done, {len(self._entries) + len(new_entries)} queued): "
                    "the work keeps creating items; raise the limit or stop splitting "
                    "sooner (e.g. a larger epsilon)")
            self._entries.extend(new_entries)
            self._cond.notify_all()

    def left(self) -> list[tuple[ItemId, Any]]:
        """The (id, item) entries still queued, in the order they would be taken."""
        with self._cond:
            return list(reversed(self._entries)) if self._lifo else list(self._entries)

    def close(self) -> None:
        """Hand out nothing more and wake every waiting worker (a worker failed)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()


#: run_queue's balancing: dynamic (one queue every device takes from, and under MPI
#: rank 0's) or static (the thesis's baseline: the initial items split once into equal
#: contiguous shares, one per device and rank, each worked to its end alone)
BALANCES = ("dynamic", "static")


def check_balance(balance: str) -> str:
    if balance not in BALANCES:
        raise OptionError("balance", f"{balance!r} is not one of: {', '.join(BALANCES)}")
    return balance


def share(sequence: Sequence, k: int, parts: int) -> list:
    """The k-th of `parts` contiguous shares of `sequence` (mpi.static_block's)."""
    start, stop = static_block(len(sequence), k, parts)
    return list(sequence[start:stop])


def budget_share(budget: int | None, k: int, parts: int, items: int) -> int | None:
    """Part k of an item budget split over the shares that hold some of `items` (the
    first min(parts, items) of `parts`, as `share` deals them): the parts add up to
    the budget, and a share without items gets none of it."""
    if budget is None:
        return None
    live = max(1, min(parts, items))
    if k >= live:
        return 0
    start, stop = static_block(budget, k, live)
    return stop - start


def check_order(order: str) -> str:
    if order not in ORDERS:
        raise OptionError("order", f"{order!r} is not one of: {', '.join(ORDERS)}")
    return order


def check_seconds(name: str, value) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) \
            or not math.isfinite(value) or value <= 0:
        raise OptionError(name, f"{value!r} is not a finite number of seconds > 0")
    return float(value)


class QueueRun:
    """What one run_queue collects as batches finish: the finished items and the
    batch records. Thread-safe: every device thread (and, under MPI, rank 0's
    helper thread for the other ranks' batches) reports into the same one."""

    def __init__(self, queue: GrowingQueue, progress):
        self.queue = queue
        self.progress = progress
        self.finished: list[Finished] = []
        self.records: list[QueueBatchRecord] = []
        self._lock = threading.Lock()

    def on_batch(self, record: QueueBatchRecord, piece: list[tuple[ItemId, Any]], results,
                 entries: list[tuple[ItemId, Any]]) -> None:
        """QueueWorker's callback: `piece` is done with `results` and created `entries`."""
        self.queue.finish(len(piece), entries)
        with self._lock:
            self.finished.extend(Finished(item_id, item, results[i])
                                 for i, (item_id, item) in enumerate(piece))
            self.records.append(record)
        self.progress.grow(len(entries), self.queue.queued)
        self.progress.advance(len(piece))


def new_entries(piece: list[tuple[ItemId, Any]], results, new_items) -> list:
    """The (id, item) entries that the items of `piece` created, checked against
    what `work` must return (a wrong length is a bug in the work function)."""
    try:
        n_results = len(results)
    except TypeError:
        raise ValueError(f"work returned {type(results).__name__} as the results of "
                         f"{len(piece)} items; return one result per item") from None
    if n_results != len(piece):
        raise ValueError(f"work returned {n_results} results for a batch of {len(piece)} "
                         "items; return one result per item, in order")
    if new_items is None:
        return []
    if len(new_items) != len(piece):
        raise ValueError(f"work returned new items for {len(new_items)} items of a batch of "
                         f"{len(piece)}; give one iterable (maybe empty) per item, in order")
    return [(parent + (k,), child) for (parent, _), children in zip(piece, new_items)
            for k, child in enumerate(children)]


class QueueWorker(DeviceWorker):
    """A DeviceWorker whose batches are lists of queued items instead of ranges;
    the memory sizing and out-of-memory halving are DeviceWorker's.

    `on_batch(record, piece, results, entries)` reports each finished piece."""

    def run_range(self, batch: list[tuple[ItemId, Any]]) -> None:
        def run_piece(offset: int, size: int):
            piece = batch[offset:offset + size]
            with self._span(items=size, first=str(piece[0][0])):
                returned = self.work(self.device, [item for _, item in piece])
            if not (isinstance(returned, tuple) and len(returned) == 2):
                raise ValueError(f"work returned a {type(returned).__name__}; return the "
                                 "pair (results, new_items)")
            results, new_items = returned
            entries = new_entries(piece, results, new_items)

            def report(seconds: float, out_of_memory_sizes: tuple[int, ...]) -> None:
                index, name = self.where()
                self.on_batch(QueueBatchRecord(index, name, self.rank, size, len(entries),
                                               seconds, out_of_memory_sizes),
                              piece, results, entries)
            return report

        self.run_in_pieces(len(batch), run_piece,
                           lambda offset, size: f"a batch of {size} queued items")
