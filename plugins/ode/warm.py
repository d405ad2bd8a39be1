"""An OdeProgram from the model cache (sbmlgpu.model_cache): the kernels of earlier
runs of the same file and options, run again in a new process without the network,
sympy, the method check or code generation.

Its specialisations are those OdeProgram.warm_state exported (specialised.py): a
run with other varied ids, outputs, constants or (under `--method auto`) other
parameter values has none, and raises model_cache.Miss, so that the caller runs it
cold and stores the merged state.
"""

from __future__ import annotations

import ctypes
import os

from sbmlgpu.model_cache import Miss
from sbmlgpu.ode.engines import GpuEngine, HostEngine
from sbmlgpu.ode.kernel_source import KernelSource

from .options import OdeOptions
from .program import OdeProgram
from .specialised import LaterKernel, Specialisation

#: specialisations kept per entry (each holds a kernel's text); the oldest go first
MAX_RUNS = 32


def record_key(record: dict) -> tuple:
    """The SpecialisationCache key of an exported record (JSON keeps floats exact)."""
    return (tuple(record["varied"]), tuple(record["outputs"]),
            tuple((k, float(v)) for k, v in record["constant"]), record["values"])


def merged(previous: dict | None, state: dict) -> dict:
    """`state` with the runs of `previous` it does not replace, newest last (records
    of `previous` that cannot be read are dropped)."""
    runs = {}
    for record in (previous or {}).get("runs", ()):
        try:
            runs[record_key(record)] = record
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
    runs.update({record_key(r): r for r in state["runs"]})
    return {**state, "runs": list(runs.values())[-MAX_RUNS:]}


class WarmOdeProgram(OdeProgram):
    def __init__(self, state: dict, options: OdeOptions, device=None):
        super().__init__(None, None, options, device)
        try:
            self._default_outputs = tuple(state["default_outputs"])
            self._records = {record_key(r): r for r in state["runs"]}
        except (KeyError, TypeError, ValueError) as exc:
            raise Miss(f"the cached state is not one this version reads ({exc})") from None
        self._state = state

    @property
    def sources(self) -> dict[str, str]:
        return dict(self._sources)

    def _outputs(self, task) -> tuple[str, ...]:
        return tuple(task.outputs or self._default_outputs)

    def _specialise(self, varied, outputs, constant, table, times, profiler=None, seed=0):
        cache = self.specialised
        key = cache.key(varied, outputs, constant, table, times)
        if key in cache.runs:
            return cache.runs[key]
        record = self._records.get(key)
        if record is None:
            raise Miss("no cached kernel for these varied parameters, outputs or values")
        try:
            source = _source(record["source"])
            engine = self._warm_engine(source, record)
            spec = Specialisation(record["method"], record["why"], source, engine,
                                  bool(record["draws"]), bool(record.get("delays")),
                                  bool(record.get("fast")), self._warm_later(record))
        except (KeyError, TypeError) as exc:
            raise Miss(f"a damaged cached kernel record ({exc})") from None
        self._sources[source.name] = source.text
        return cache.add(key, spec)

    def _warm_later(self, record: dict) -> LaterKernel | None:
        """The later passes' kernel where the cold run generated it (without it, those
        members run with the first method: no sympy here to generate it)."""
        later = record.get("later")
        if not later:
            return None
        source = _source(later["source"])
        return LaterKernel(later["method"], lambda: source,
                           lambda source: self._warm_engine(source, {**record, "library": None}),
                           source)

    def _warm_engine(self, source: KernelSource, record: dict):
        if self.device is not None:
            if record["engine"] != "gpu":
                raise Miss("the cached kernel ran on the CPU path")
            return GpuEngine(source, self.options.fast_math)
        if record["engine"] != "native":
            raise Miss("the cached kernel ran on a GPU")
        from .native import HostKernel, host_kernel

        library = record.get("library")
        if library and os.path.isfile(library):
            # the host build cache's own file for this source and these flags (the
            # compilers are part of the entry's key): no compiler probe, no build
            return HostEngine(source, HostKernel(source, ctypes.CDLL(library)))
        return HostEngine(source, host_kernel(source))  # rebuilt from the cached text

    def warm_state(self, previous: dict | None = None) -> dict:
        return merged(previous, {"default_outputs": list(self._default_outputs),
                                 "runs": list(self._records.values())})


def _source(fields: dict) -> KernelSource:
    """A KernelSource from its exported fields."""
    fields = dict(fields)
    fields["fixed_values"] = tuple(fields.get("fixed_values", ()))  # JSON: a list
    return KernelSource(**fields)
