"""KernelSource: a generated kernel's text and what the profiler counts of it.

Apart from codegen.py (which makes it, and imports sympy) so that a kernel kept in
the model cache (sbmlgpu.model_cache) can be run again without importing sympy."""

from __future__ import annotations

from dataclasses import dataclass

#: history nodes per member of a model with delay() (0: chosen by size; delays.py
#: says how); here rather than in delays.py so that the options need no sympy
DEFAULT_HISTORY_NODES = 0


@dataclass(frozen=True)
class KernelSource:
    name: str  # file name for --keep-source
    text: str
    kernel: str  # the __global__ function
    method: str
    precision: str
    flops_per_rhs: float
    flops_per_step: float  # one attempted step (what the step counter counts)
    flops_per_output: float
    jacobian: str  # "analytic", "fd" or "none"
    linear_algebra: str = "none"  # rodas4: "dense LU" or "sparse LU (nnz)"
