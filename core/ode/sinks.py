"""Output sinks: where an ODE kernel puts each member's outputs, template + Python side.

The driver (templates/driver.cuh) hands the outputs y at output time k to
`ode_sink_store(&sink, k, y)`, and marks the output times a failed member never
reached with `ode_sink_invalid(&sink, k)`. A sink is a template that defines
`ode_sink` and those two functions, plus what the entry points (templates/entry.cuh)
need to build one per member: the launch arguments (`params`, C text), the
expression that makes the member's sink (`make`) and the per-member variables it
keeps between output times (`locals`, C declarations; empty for most sinks). The
entry points are named `<entry>_<method>` (CUDA) and `<entry>_host` (host build).

- TrajectorySink: the values, out[(k * n_outputs + j) * n + i] (coalesced); the
  engines (engines.py) turn them into (members, times, outputs). In a bundled launch
  of a contiguous range of members, the column is the member's place in that range
  instead (first_member: the range's first member; LAUNCH_ORDER: launch order), so
  that the rows come out in member order without a scatter on the host.
- The on-GPU summary (summary.py, templates/summary.cu) reduces the trajectory
  sink's device buffer where it lies, so that time courses never cross the bus.
- BinSink: each value's bin index among K equal bins of a per-output range, as
  small integers, member-major (for DBN approximation, which counts joint
  configurations of binned values).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import OptionError

MAX_BINS = 65535  # the largest K whose indices and invalid mark fit 16 bits
#: first_member of a bundled launch that writes in launch order (ODE_LAUNCH_ORDER)
LAUNCH_ORDER = 2**64 - 1


@dataclass(frozen=True)
class TrajectorySink:
    """The values themselves (templates/sink_trajectory.cuh)."""

    template = "sbmlgpu.ode:sink_trajectory.cuh"
    entry = "sbmlgpu_ode"
    params = "real_t* __restrict__ out"
    make = "ode_trajectory_sink(out, ode_sink_column(i, members, member, first_member), n)"
    locals = ""  # no per-member state between output times

    def nbytes(self, n_members: int, n_times: int, n_outputs: int, itemsize: int) -> int:
        """Bytes of the sink's output array for a launch of `n_members`."""
        return n_members * n_times * n_outputs * itemsize


class BinIndices:
    """What a sink that bins (templates/binning.cuh) tells the template about its
    indices, from its `bins`: the index type and the index of NaN."""

    bins: int

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.uint8 if self.bins <= 255 else np.uint16)

    @property
    def c_type(self) -> str:
        return "unsigned char" if self.dtype == np.uint8 else "unsigned short"

    @property
    def invalid(self) -> int:
        """The index of NaN: the type's largest value (never a bin: bins <= that)."""
        return int(np.iinfo(self.dtype).max)


@dataclass(frozen=True)
class BinSink(BinIndices):
    """The bin index of each value among `bins` equal bins of its output's range
    (templates/sink_bins.cuh): edges numpy.linspace(lo, hi, bins + 1), a value v in
    the bin b with edge_b <= v < edge_b+1 (numpy.digitize), values below lo in bin 0,
    at or above hi in bin bins - 1, NaN (and the output times a failed member never
    reached) the index `invalid`. Layout: bins_out[(i * n_times + k) * n_outputs + j]
    of `dtype` (uint8 for bins <= 255, else uint16)."""

    bins: int
    template = "sbmlgpu.ode:sink_bins.cuh"
    entry = "sbmlgpu_ode_bins"
    params = "ode_bin_t* __restrict__ bins, const double* __restrict__ ranges"
    make = "ode_bins_sink(bins, ranges, i, n_times)"
    locals = ""  # no per-member state between output times

    def __post_init__(self):
        if isinstance(self.bins, bool) or not isinstance(self.bins, (int, np.integer)) \
                or not 1 <= self.bins <= MAX_BINS:
            raise OptionError("bins", f"{self.bins!r} must be a whole number of bins from 1 "
                                      f"to {MAX_BINS}")

    def nbytes(self, n_members: int, n_times: int, n_outputs: int, itemsize: int = 0) -> int:
        """Bytes of the sink's output array for a launch of `n_members`."""
        return n_members * n_times * n_outputs * self.dtype.itemsize

    def ranges(self, ranges, outputs) -> np.ndarray:
        """The (n_outputs, 2) float64 array [lo, hi) per output, C-contiguous, as the
        kernel reads it; OptionError naming the output whose range is not finite or
        not increasing."""
        outputs = tuple(outputs)
        array = np.asarray(ranges, dtype=np.float64)
        if array.shape != (len(outputs), 2):
            raise OptionError("ranges", f"need one (low, high) pair per output "
                                        f"({len(outputs)}), got shape {array.shape}")
        for sid, (lo, hi) in zip(outputs, array):
            if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
                raise OptionError("ranges", f"the range of {sid!r} is [{lo!r}, {hi!r}): "
                                            f"it must be finite with low < high")
        return np.ascontiguousarray(array)
