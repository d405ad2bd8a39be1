"""Options of the `dbn` backend (the task's own fields — ensemble, samples, slices,
slice time, steps, bins, ranges, seed — are DbnApproximation's: sbmlgpu.tasks)."""

from __future__ import annotations

from dataclasses import dataclass

from sbmlgpu.backend import BackendOptions, option
from sbmlgpu.errors import OptionError

#: Dense CPTs up to this many parent configurations (K**parents) per variable and
#: transition: 5 bins and 6 parents (15,625) fit; beyond, counted sparsely on the host.
DEFAULT_MAX_DENSE_ROWS = 65_536


@dataclass
class DbnOptions(BackendOptions):
    precision: str = option("float", "arithmetic of the integration (float: as Hagiescu "
                                     "et al., twice the GPU's throughput; double)",
                            choices=("float", "double"))
    fast_math: bool = option(True, "compile the GPU kernels with nvcc --use_fast_math "
                                   "(float: division and functions to about 2 ulp, "
                                   "denormals flushed to zero; 3.5x faster on EGF-NGF, "
                                   "whose 20 divisions per evaluation dominate; double is "
                                   "unaffected). The CPU path always computes as g++ "
                                   "does without it",)
    block_size: int = option(128, "threads per block of the kernels", minimum=32,
                             maximum=1024)
    max_dense_rows: int = option(DEFAULT_MAX_DENSE_ROWS,
                                 "largest parent-configuration count of a CPT counted "
                                 "densely on the device; larger ones are counted from bin "
                                 "records on the host (only visited configurations)",
                                 minimum=1)
    batch: int = option(0, "trajectories per kernel launch (0: as many as memory allows)",
                        minimum=0)
    # the counting kernel on the GPU (plugins/dbn/heterogeneous.py)
    kernel: str = option("homogeneous",
                         "the counting kernel on the GPU: homogeneous (one thread per "
                         "trajectory), heterogeneous (the equations split over warps that "
                         "share each trajectory in shared memory, Hagiescu et al. 2013; "
                         "no events), auto (heterogeneous where it applies and "
                         "the model has at least 64 equations)",
                         choices=("homogeneous", "heterogeneous", "auto"))
    warps: int = option(0, "compute warps of the heterogeneous kernel (0: its cost model "
                           "chooses; at most 8 and the number of equations)",
                        minimum=0, maximum=8)

    def check(self) -> None:
        if self.warps and self.kernel == "homogeneous":
            raise OptionError("warps", f"{self.warps}: compute warps belong to the "
                                       f"heterogeneous kernel; add --kernel heterogeneous "
                                       f"(or auto)")
