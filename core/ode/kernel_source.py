"""KernelSource: a generated kernel's text and what the profiler counts of it.

Apart from codegen.py (which makes it, and imports sympy) so that a kernel kept in
the model cache (sbmlgpu.model_cache) can be run again without importing sympy."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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
    #: values of the fixed parameters the kernel reads at launch (fixed_slots): they
    #: travel after the output times in the times argument (launch_times)
    fixed_values: tuple[float, ...] = ()

    def launch_times(self, times) -> np.ndarray:
        """The times argument of a launch: the output times, then fixed_values
        (float64; the engine converts to its real type, as a literal is rounded)."""
        times = np.asarray(times, dtype=np.float64).reshape(-1)
        if not self.fixed_values:
            return times
        return np.concatenate([times, np.asarray(self.fixed_values, dtype=np.float64)])
