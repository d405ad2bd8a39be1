"""The dbn backend's output sinks, Python side (templates: kernels/sink_cpt.cuh,
kernels/sink_range.cuh): what the entry points take (`params`), how a member's sink
is made (`make`, `locals`), and the generated counting code of the CPT sink — one
block per dense variable, naming its SBML id and its parents.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sbmlgpu.ode.naming import comment as c_comment
from sbmlgpu.ode.sinks import BinIndices

from .structure import DbnStructure

PACKAGE = "sbmlgpu.plugins.dbn"


@dataclass(frozen=True)
class CptSink(BinIndices):
    structure: DbnStructure
    records: bool  # write the bin records (some variable is counted on the host)

    template = f"{PACKAGE}:sink_cpt.cuh"
    entry = "sbmlgpu_dbn_cpt"
    params = ("unsigned int* __restrict__ counts, ode_bin_t* __restrict__ records, "
              "const double* __restrict__ ranges, unsigned int weight")
    make = "dbn_cpt_sink(counts, records, ranges, weight, i, n_times, dbn_prev)"
    locals = "ode_bin_t dbn_prev[ODE_NOUT_REAL];"

    @property
    def bins(self) -> int:  # what binning.cuh reads (BinIndices)
        return self.structure.bins

    @property
    def counting(self) -> str:
        """The C block that counts every dense variable's transition (inside
        ode_sink_store: `sink`, `prev`, `now`, `table`, `transition` in scope). A
        variable's tables start at its base times the launch's transitions, so the
        text does not depend on the number of slices (one compile for any --slices)."""
        s = self.structure
        position = {v: j for j, v in enumerate(s.variables)}
        k = s.bins
        lines = []
        for v in s.dense:
            pa = s.parents[v]
            row = f"(unsigned int)prev[{position[pa[0]]}]"
            for p in pa[1:]:
                row = f"({row} * {k}u + prev[{position[p]}])"
            valid = " && ".join([f"prev[{position[p]}] != ODE_BIN_INVALID" for p in pa]
                                + [f"now[{position[v]}] != ODE_BIN_INVALID"])
            lines.append(f"        /* {c_comment(v)}: parents {c_comment(', '.join(pa))} */")
            lines.append(f"        if ({valid}) {{")
            lines.append(f"            const unsigned int row = {row};")
            lines.append(f"            dbn_count(table + {s.bases[v]}LL * sink->transitions + "
                         f"(transition * {s.rows(v)}LL + row) * {k} + now[{position[v]}], "
                         f"sink->weight);")
            lines.append("        }")
        if not lines:
            lines.append("        (void)prev; (void)table; (void)transition;"
                         " /* every variable is counted on the host */")
        return "\n".join(lines)




@dataclass(frozen=True)
class RangeSink:
    """The range pass: min and max of every variable; and, where `values` is not
    null, every value itself (values[(k * NV + j) * stride + i], coalesced), which
    the count kernel's replay entry points then count without integrating again. Its
    own replay entry points (kernels/replay.cuh, in every dbn kernel) find the
    extrema of values the heterogeneous kernel kept."""

    template = f"{PACKAGE}:sink_range.cuh"
    entry = "sbmlgpu_dbn_range"
    params = ("unsigned long long* __restrict__ extrema, real_t* __restrict__ values, "
              "long long stride")
    make = "dbn_range_sink(extrema, values, stride, i, dbn_lo, dbn_hi, &dbn_failed, n_times)"
    locals = "real_t dbn_lo[ODE_NOUT_REAL], dbn_hi[ODE_NOUT_REAL]; bool dbn_failed;"


def range_keys_start(n_variables: int) -> np.ndarray:
    """The extrema buffer before the range pass: min keys at their largest, max keys
    at their smallest (so that any value replaces them)."""
    keys = np.empty(2 * n_variables, dtype=np.uint64)
    keys[0::2] = np.iinfo(np.uint64).max
    keys[1::2] = 0
    return keys


def keys_to_values(keys: np.ndarray) -> np.ndarray:
    """The inverse of kernels/sink_range.cuh's dbn_order_key: (variables, 2) doubles."""
    keys = np.asarray(keys, dtype=np.uint64)
    top = np.uint64(1) << np.uint64(63)
    bits = np.where(keys & top, keys ^ top, ~keys)
    return bits.view(np.float64).reshape(-1, 2)
