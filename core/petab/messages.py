"""The words for a PEtab objective's failed sets, formed when read.

An objective of 10^5 sets may fail tens of thousands of them (Crauste_CellSystems2017
fails a quarter at its sampled bounds). Writing a message per failed set in a Python
loop cost more than the rest of a repeated call's host work, so the messages are kept
as arrays (each set's status and the first run that failed it) plus the backend's own
words where it gave any, and a message is formed only when it is read. Nothing is
lost: every failed set has its message, as from a dict (a read-only mapping: `dict(m)`
where a real dict is needed, e.g. for json).
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping

import numpy as np

from ..results.status import Status


class FailureMessages(Mapping):
    """{set: message} for every set whose status is not ok. A set failed by run k
    reads "<where[k]>: <the backend's words, or its status's message>"; a set that
    no run failed (e.g. a likelihood that is not finite) reads its status's message."""

    def __init__(self, status: np.ndarray, first_run: np.ndarray, where: list[str],
                 notes: Mapping[tuple[int, int], str]):
        self._status = status  # shared with the result: a status set later is seen
        self._first_run = first_run
        self._where = where
        self._notes = notes

    def __getitem__(self, member) -> str:
        try:
            j = operator.index(member)  # set numbers only, as a dict of them keys
        except TypeError:
            raise KeyError(member) from None
        if not 0 <= j < len(self._status) or self._status[j] == int(Status.ok):
            raise KeyError(member)
        default = Status(int(self._status[j])).message
        k = int(self._first_run[j])
        if k < 0:
            return default
        return f"{self._where[k]}: {self._notes.get((k, j), '') or default}"

    def unrun(self, members: np.ndarray) -> None:
        """`members` (a mask) failed before any run could: their status's message."""
        self._first_run = np.where(members, -1, self._first_run)

    def __iter__(self) -> Iterator[int]:
        return (int(j) for j in np.flatnonzero(self._status != int(Status.ok)))

    def __len__(self) -> int:
        return int(np.count_nonzero(self._status != int(Status.ok)))

    def __repr__(self) -> str:
        shown = dict(item for item, _ in zip(self.items(), range(3)))
        return f"FailureMessages({len(self)} failed sets, first: {shown})"


def first_failures(run_status: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A set fails with the first failure of any of its runs: (status per set,
    the index of that run or -1) from the (runs, sets) status codes."""
    n = run_status.shape[1]
    status = np.zeros(n, np.int8)
    first_run = np.full(n, -1, np.int32)
    for k in range(run_status.shape[0]):
        fresh = (status == 0) & (run_status[k] != 0)
        status[fresh] = run_status[k][fresh]
        first_run[fresh] = k
    return status, first_run
