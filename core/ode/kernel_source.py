"""KernelSource: a generated kernel's text and what the profiler counts of it.

Apart from codegen.py (which makes it, and imports sympy) so that a kernel kept in
the model cache (sbmlgpu.model_cache) can be run again without importing sympy."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: history nodes per member of a model with delay() (0: chosen by size; delays.py
#: says how); here rather than in delays.py so that the options need no sympy
DEFAULT_HISTORY_NODES = 0
#: members per block of a launch's delay() history buffer (templates/delay.cuh's
#: ODE_HISTORY_GROUP: a warp, whose lanes then read one contiguous run)
HISTORY_GROUP = 32


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
    #: reals of one member's delay() history ring (delays.history_reals; 0: no
    #: delay()): the engine allocates a launch's members' worth and passes it last
    history_reals: int = 0
    #: whether `kernel` is the refill entry point, whose threads take the next member
    #: when theirs ends and which takes a zeroed queue counter last (templates/entry.cuh)
    refills: bool = False

    def history_buffer_reals(self, n_members: int) -> int:
        """Reals of a launch's history buffer for `n_members` (whole blocks of
        HISTORY_GROUP members: delay.cuh's layout); 0 without delay()."""
        return -(-int(n_members) // HISTORY_GROUP) * HISTORY_GROUP * self.history_reals

    def launch_times(self, times) -> np.ndarray:
        """The times argument of a launch: the output times, then fixed_values
        (float64; the engine converts to its real type, as a literal is rounded)."""
        times = np.asarray(times, dtype=np.float64).reshape(-1)
        if not self.fixed_values:
            return times
        return np.concatenate([times, np.asarray(self.fixed_values, dtype=np.float64)])
