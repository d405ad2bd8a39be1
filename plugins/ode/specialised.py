"""What a run of the `ode` backend specialises, kept for the next run.

Per (varied ids, outputs, constant values): the KernelModel (sympy work); per model
and parameter values: the `--method auto` check (reference trajectories); per model
and method: the kernel and its engine (OdeProgram._engine). A repeated
`sbmlgpu.run` on a loaded model is then the integration alone (issue 13).

`export()` writes the specialisations as JSON-able records for sbmlgpu.model_cache;
warm.py runs them again in a new process without sympy.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import asdict, dataclass
from typing import Any, Callable

import numpy as np

from sbmlgpu.errors import DeviceError
from sbmlgpu.runtime.host_threads import over_pieces
from sbmlgpu.ode.kernel_source import KernelSource

#: method checks remembered per model (a sweep over many tables must not grow without end)
MAX_METHODS = 64
#: values_key hashes the parameter table in chunks of this many bytes
KEY_CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class Specialisation:
    method: str
    why: str
    source: KernelSource
    engine: Any
    draws: bool
    delays: bool = False  # delay(): failure messages name the history ring
    fast: bool = False  # fast reactions: failure messages name the relaxation
    #: under --method auto, the kernel the members past --pass-steps run again with
    #: (passes.later_method), None where they keep the first pass's
    later: "LaterKernel | None" = None


class LaterKernel:
    """The kernel of another method for the members past --pass-steps: its source
    generated and its engine built on first use only (most runs have no such member;
    SalazarCavazos_MBoC2020's bdf kernel takes 0.7 s of sympy printing, Chen_MSB2009's
    2.3 s), once, from whichever thread asks first (a GPU run's host pass builds in
    the background)."""

    def __init__(self, method: str, make_source: Callable[[], KernelSource],
                 make_engine: Callable[[KernelSource], Any],
                 source: KernelSource | None = None):
        self.method = method
        self._make_source = make_source
        self._make_engine = make_engine
        self._source = source
        self._engine = None
        #: the build's error where it failed: raised again, not built again, by later
        #: runs (a sampler's every call would pay sympy and g++ for the same failure)
        self.build_error: Exception | None = None
        self._lock = threading.Lock()

    @property
    def generated(self) -> bool:
        return self._source is not None

    def source(self) -> KernelSource:
        with self._lock:
            if self._source is None:
                self._source = self._make_source()
            return self._source

    def engine(self):
        """The built engine; raises the build's DeviceError (a compiler that rejects
        the source or is missing) or OSError, the first time and every time after."""
        if self.build_error is not None:
            raise self.build_error
        try:
            # the source too: OdeProgram makes it through its engine table, which
            # builds the engine with it
            source = self.source()
            with self._lock:
                if self._engine is None:
                    self._engine = self._make_engine(source)
                return self._engine
        except (DeviceError, OSError) as exc:
            self.build_error = exc
            raise


def model_key(varied, outputs, constant: dict) -> tuple:
    return (tuple(varied), tuple(outputs), tuple(sorted(constant.items())))


def values_key(table: np.ndarray, times: np.ndarray) -> str:
    """What the method check reads: the parameter table and the time span. The
    table's bytes are hashed in place, in chunks of KEY_CHUNK_BYTES on the host's
    threads (hashlib releases the GIL), and the key is the digest of the chunks'
    digests in order: the same on any machine, whatever its thread count. Every
    --method auto run pays this over its whole table: one sha256 over a copy made by
    tobytes() took 0.14 s for Lucarelli_CellSystems2018's 141 x 10^5 table on the
    development machine (on an H200's host, 0.094 s of a 0.247 s repeat was outside
    every named phase)."""
    table = np.ascontiguousarray(table, dtype=np.float64)
    data = memoryview(table.reshape(-1)).cast("B")  # the table's own bytes, no copy
    chunks = -(-data.nbytes // KEY_CHUNK_BYTES)

    def digests(first: int, stop: int) -> bytes:
        return b"".join(hashlib.sha256(data[k * KEY_CHUNK_BYTES:(k + 1) * KEY_CHUNK_BYTES])
                        .digest() for k in range(first, stop))

    digest = hashlib.sha256(b"".join(over_pieces(digests, chunks, min_items=4)))
    digest.update(repr((table.shape, float(times[0]), float(times[-1]))).encode())
    return digest.hexdigest()


class SpecialisationCache:
    def __init__(self, auto_method: bool = True):
        #: False: the method is the user's, so the check's inputs are no part of a key
        self.auto_method = auto_method
        self._models: dict[tuple, Any] = {}
        self._methods: dict[tuple, tuple[str, str]] = {}
        self.runs: dict[tuple, Specialisation] = {}

    def key(self, varied, outputs, constant, table, times) -> tuple:
        values = values_key(table, times) if self.auto_method else None
        return model_key(varied, outputs, constant) + (values,)

    def model(self, varied, outputs, constant, build: Callable[[], Any]):
        key = model_key(varied, outputs, constant)
        if key not in self._models:
            self._models[key] = build()
        return self._models[key]

    def method(self, key: tuple, choose: Callable[[], tuple[str, str]]) -> tuple[str, str]:
        if key not in self._methods:
            if len(self._methods) >= MAX_METHODS:
                self._methods.pop(next(iter(self._methods)))
            self._methods[key] = choose()
        return self._methods[key]

    def add(self, key: tuple, spec: Specialisation) -> Specialisation:
        if len(self.runs) >= MAX_METHODS:  # one per method check at most: same bound
            self.runs.pop(next(iter(self.runs)))
        self.runs[key] = spec
        return spec

    def export(self, library: Callable[[KernelSource], str | None]) -> list[dict]:
        """JSON-able records of the runs whose engine can be rebuilt from the source
        alone (the GPU's and the native host engine; not numpy's, which needs sympy)."""
        records = []
        for (varied, outputs, constant, values), spec in self.runs.items():
            if spec.engine.name not in ("native", "gpu"):
                continue
            records.append({
                "varied": list(varied), "outputs": list(outputs),
                "constant": [[k, v] for k, v in constant], "values": values,
                "method": spec.method, "why": spec.why, "draws": spec.draws,
                "delays": spec.delays, "fast": spec.fast,
                "engine": spec.engine.name, "source": asdict(spec.source),
                "library": library(spec.source) if spec.engine.name == "native" else None,
                # the later passes' kernel where a run generated it (warm.py: without
                # it a new process runs those members with the first method)
                "later": {"method": spec.later.method, "source": asdict(spec.later.source())}
                if spec.later is not None and spec.later.generated else None})
        return records
