"""The two kernels of a DBN approximation, generated from one KernelModel: the range
pass (RangeSink) and the counting pass (CptSink), both fixed-step RK4 through
kernels/dbn.cu. `sources` keeps their text for --keep-source."""

from __future__ import annotations

from dataclasses import dataclass

from sbmlgpu.ode.codegen import KernelSource, generate
from sbmlgpu.ode.model import KernelModel

from .sinks import PACKAGE, CptSink, RangeSink
from .structure import DbnStructure

TEMPLATE = (PACKAGE, "dbn.cu")


@dataclass(frozen=True)
class DbnKernels:
    ranges: KernelSource
    counts: KernelSource
    sink: CptSink

    @property
    def sources(self) -> dict[str, str]:
        return {self.ranges.name: self.ranges.text, self.counts.name: self.counts.text}


def dbn_kernels(model: KernelModel, structure: DbnStructure, precision: str,
                block_size: int) -> DbnKernels:
    sink = CptSink(structure, records=bool(structure.sparse))
    common = dict(template=TEMPLATE, block_size=block_size)
    return DbnKernels(
        ranges=generate(model, "rk4", precision, sink=RangeSink(), prefix="dbn_range", **common),
        counts=generate(model, "rk4", precision, sink=sink, prefix="dbn_cpt", **common),
        sink=sink)
