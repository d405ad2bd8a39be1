"""Values built once per key, for caches whose builds are slow (compiles).

One lock around every build would make a thread that asks for a library loaded long
ago wait behind another thread's compile of a different one: on the H200 a second
run's second pass waited 0.47 s for its (loaded) bdf build behind the rodas4 retry's
compile that the first run had started (2026-12-03, Weber_BMC2015). Here a build
holds only its own key's lock.
"""
from __future__ import annotations

import threading
from typing import Callable, Generic, Hashable, TypeVar

V = TypeVar("V")


class OncePerKey(Generic[V]):
    """`get(key, build)`: the value of `key`, built by `build()` on first use.
    Threads asking for one key at once build it once; threads asking for other keys
    do not wait for it. A build that raises stores nothing (the next call builds
    again)."""

    def __init__(self) -> None:
        self._values: dict[Hashable, V] = {}
        self._building: dict[Hashable, threading.Lock] = {}
        self._lock = threading.Lock()  # held only to read or write the two dicts

    def get(self, key: Hashable, build: Callable[[], V]) -> V:
        with self._lock:
            if key in self._values:
                return self._values[key]
            key_lock = self._building.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                if key in self._values:  # built by the thread this one waited for
                    return self._values[key]
            value = build()
            with self._lock:
                self._values[key] = value
                self._building.pop(key, None)
            return value

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._values
