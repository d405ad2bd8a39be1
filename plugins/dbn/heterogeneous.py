"""The heterogeneous counting kernel (Hagiescu et al. 2013): the right-hand side of
one trajectory split over C warps that share its working set in shared memory.

A block holds T trajectories (a multiple of 32) and C + M warps. Compute warp c
evaluates the equations of group c for every trajectory of the block (lane l:
trajectories l, l + 32, ...); the RK4 stage vectors live in shared memory laid out
[variable][trajectory], so the 32 lanes of a warp touch 32 consecutive words. After
each of the four RK4 stages the compute warps meet at a named barrier (the memory
warps do not take part). At every time slice the compute warps bin the trajectories
into one of three shared slots and signal it with `bar.arrive`; the M memory warps
wait for it (`bar.sync`), count each transition into the CPTs (global atomics) and
free the slot again, while the compute warps integrate the next slice. The kernel
text is kernels/heterogeneous.cu.

Applicable where the model watches no atoms and has no events (the fixed-step tight
loop of the driver) and 32 trajectories fit the shared memory of a block. Variables
counted on the host (too many parents for a dense CPT) get their bin records from the
memory warps, which copy each slice's bins out as the homogeneous CPT sink writes them.
`--kernel auto` falls back to the homogeneous kernel otherwise; `--kernel
heterogeneous` is then an OptionError saying why.

Arithmetic: the right-hand side is CSE'd once over all equations
(sbmlgpu.ode.codegen.eliminate_common, as the homogeneous kernel's model_rhs is), and
each group prints the temporaries its equations need from that same block, in the
same order, with the same printer (only x and p are read from shared memory). Every
dx is therefore the same expression as in model_rhs, and the stage updates are the
RK4 template's formulas in the same order (the accumulator f + 2 k2 + 2 k3 keeps the
left-to-right order of rk4.cuh's sum). Where nvcc contracts a product into an FMA,
LLVM prefers the product with fewer uses; a product shared by equations of several
groups has fewer uses inside one group, so in float a result can differ in the last
bit now and then (tests/test_dbn_heterogeneous.py: exact in double, counts within a
small tolerance in float).

Cost model (`choose_c`): the cost of a group is the weighted FLOP count
(sbmlgpu.codegen.cost) of its temporaries and equations plus the stage update of its
variables. Equations are assigned, largest first, to the group whose cost grows
least (temporaries shared with equations already there cost nothing again). For each
C the time of one RK4 stage on one SM is the larger of the critical path (one warp
runs its group for its tiles, a dependent instruction every LATENCY cycles, then the
barrier) and the issue limit (all resident warps' instructions over the SM's
schedulers); C maximises trajectories per cycle. FLOPs stand in for instructions.

Failed members: each slice checks the state (as the driver's tight loop does); a
member whose state is not finite gets status NON_FINITE, its bins at that slice and
after are invalid, so the transition into that slice and all later ones are not
counted. The transitions it made before are taken back out by the program's weight -1
pass over the failed members, which runs this same kernel: the arithmetic of one
member does not depend on the block or lane it runs in, so the rerun adds exactly
what the first pass added.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from dataclasses import dataclass

import sympy as sp

from sbmlgpu.codegen.cost import count_ops
from sbmlgpu.codegen.cse import CseBlock
from sbmlgpu.codegen.printer import CudaPrinter
from sbmlgpu.codegen.templates import render
from sbmlgpu.errors import OptionError
from sbmlgpu.ode import naming
from sbmlgpu.ode.codegen import KernelSource, eliminate_common, kernel_context, model_printer
from sbmlgpu.ode.model import KernelModel

from .sinks import PACKAGE, CptSink
from .structure import DbnStructure

TEMPLATE = (PACKAGE, "heterogeneous.cu")
ENTRY = "sbmlgpu_dbn_cpt_heterogeneous"
#: the values variant: the range pass of a run whose values are kept (no counting)
VALUES_ENTRY = "sbmlgpu_dbn_values_heterogeneous"
MAX_COMPUTE_WARPS = 8
#: `--kernel auto` takes the heterogeneous kernel from this many equations on (smaller
#: models keep their whole state in one thread's registers). Measured on an H100
#: (docs/benchmarks.md): 16 and 28 equations 0.38x and 0.24x the homogeneous kernel,
#: 98 equations 6.5x
AUTO_MIN_EQUATIONS = 64
SLOTS = 3  # bin slots in shared memory: slice k written while k-1 and k-2 are counted
MAX_TILES = 8  # at most 8 * 32 trajectories per block
MIN_REGISTERS = 64  # per thread, the least __launch_bounds__ may leave the kernel
#: per-equation work of a stage update (x + c k, the accumulator), in weighted FLOPs
STAGE_UPDATE_FLOPS = 4.0


@dataclass(frozen=True)
class SmLimits:
    """What the cost model and the block size assume of one SM. Defaults: Hopper
    (sm_90, H100 and H200); the shared memory sizes come from the device when known."""

    shared_per_block: int = 227 * 1024  # opt-in maximum of dynamic shared memory
    shared_per_sm: int = 228 * 1024
    reserved_per_block: int = 1024  # the runtime's own shared memory per block
    max_warps: int = 64
    max_blocks: int = 32
    schedulers: int = 4  # warp instructions issued per cycle
    latency: float = 4.0  # cycles between dependent FP32 instructions
    barrier: float = 24.0  # cycles of a bar.sync among the compute warps
    atomic: float = 40.0  # cycles of one warp-aggregated count (match + atomicAdd)
    registers: int = 65536  # 32-bit registers of an SM

    @classmethod
    def of(cls, device) -> "SmLimits":
        if device is None:
            return cls()
        props = device.properties
        return cls(shared_per_block=int(props.shared_memory_per_block_optin),
                   shared_per_sm=int(props.shared_memory_per_sm))


# -- the right-hand side, its groups and their cost ------------------------------------
class RhsBlock:
    """The model's rhs CSE'd once (as model_rhs prints it), and which temporaries each
    equation needs (transitively), with the weighted FLOPs of each piece."""

    def __init__(self, model: KernelModel):
        self.model = model
        self.block: CseBlock = eliminate_common(list(model.rhs))
        temps = self.block.temporaries
        index = {symbol: k for k, (symbol, _) in enumerate(temps)}
        closure: list[frozenset[int]] = []
        for k, (_, e) in enumerate(temps):
            closure.append(frozenset({k}).union(*[closure[index[s]] for s in _symbols(e)
                                                  if s in index]))
        self.needs = tuple(frozenset().union(*[closure[index[s]] for s in _symbols(e)
                                               if s in index])
                           for e in self.block.outputs)
        self.temp_flops = tuple(count_ops(e).flops() for _, e in temps)
        self.out_flops = tuple(count_ops(e).flops() + STAGE_UPDATE_FLOPS
                               for e in self.block.outputs)

    @property
    def n_equations(self) -> int:
        return len(self.block.outputs)

    def temporaries_of(self, equations) -> tuple[int, ...]:
        """The temporaries `equations` need, in the block's (evaluation) order."""
        return tuple(sorted(frozenset().union(*[self.needs[i] for i in equations])))

    def cost(self, equations) -> float:
        """Weighted FLOPs of one stage of a group: its temporaries once, its equations."""
        return (sum(self.temp_flops[k] for k in self.temporaries_of(equations))
                + sum(self.out_flops[i] for i in equations))


def _symbols(e) -> set:
    return e.free_symbols if isinstance(e, sp.Basic) else set()


@dataclass(frozen=True)
class EquationGroup:
    index: int  # = the compute warp that evaluates it
    equations: tuple[int, ...]  # state indices, model order
    temporaries: tuple[int, ...]  # indices into RhsBlock.block.temporaries
    flops: float  # RhsBlock.cost of the group


def partition(rhs: RhsBlock, c: int) -> tuple[EquationGroup, ...]:
    """The equations split into `c` non-empty groups balanced by cost: largest first,
    each to the group whose cost grows least (ties: the lower group)."""
    n = rhs.n_equations
    if not 1 <= c <= n:
        raise ValueError(f"{c} groups for {n} equations")
    order = sorted(range(n), key=lambda i: (-rhs.cost([i]), i))
    members: list[list[int]] = [[] for _ in range(c)]
    for rank, i in enumerate(order):
        g = rank if rank < c else min(range(c), key=lambda g: (rhs.cost(members[g] + [i]), g))
        members[g].append(i)
    return tuple(EquationGroup(g, tuple(sorted(m)), rhs.temporaries_of(m), rhs.cost(m))
                 for g, m in enumerate(members))


# -- the block: trajectories per block from shared memory --------------------------------
@dataclass(frozen=True)
class BlockLayout:
    trajectories: int  # T, a multiple of 32
    compute_warps: int  # C
    memory_warps: int  # M
    bytes_per_trajectory: int

    @property
    def threads(self) -> int:
        return 32 * (self.compute_warps + self.memory_warps)

    @property
    def tiles(self) -> int:
        return self.trajectories // 32

    @property
    def shared_bytes(self) -> int:
        """sizeof(dbn_shared) of kernels/heterogeneous.cu (the kernel asserts it)."""
        return self.trajectories * self.bytes_per_trajectory


def bytes_per_trajectory(model: KernelModel, structure: DbnStructure, precision: str) -> int:
    """Shared memory of one trajectory: x, f, the accumulator and the two stage
    arguments (5 per state), the varied parameters, steps (int), the bins of three
    slices and the status byte."""
    real = 8 if precision == "double" else 4
    nx, np_ = max(model.n_states, 1), max(len(model.varied), 1)
    bin_bytes = CptSink(structure, records=False).dtype.itemsize
    return real * (5 * nx + np_) + 4 + SLOTS * bin_bytes * max(len(structure.variables), 1) + 1


def block_layout(per_trajectory: int, c: int, m: int, limits: SmLimits) -> BlockLayout | None:
    """T from shared memory: as many tiles of 32 trajectories as the share of one block
    allows when the SM holds as many blocks as its warp slots take (at most MAX_TILES);
    None where 32 trajectories do not fit one block."""
    blocks = max(1, min(limits.max_blocks, limits.max_warps // (c + m)))
    share = min(limits.shared_per_sm // blocks - limits.reserved_per_block,
                limits.shared_per_block)
    tiles = min(MAX_TILES, share // (32 * per_trajectory))
    if tiles < 1:
        if 32 * per_trajectory > limits.shared_per_block:
            return None
        tiles = 1
    return BlockLayout(32 * tiles, c, m, per_trajectory)


def memory_warps(groups, n_counted: int, steps_per_slice: int, limits: SmLimits) -> int:
    """1, or 2 where one memory warp's counts of a slice (one aggregated atomic per
    dense variable and tile) would take longer than the compute warps' slice."""
    critical = max(g.flops for g in groups) * limits.latency + limits.barrier
    return 2 if n_counted * limits.atomic > 4 * steps_per_slice * critical else 1


def resident_blocks(layout: BlockLayout, limits: SmLimits) -> int:
    """Blocks one SM holds, by warp slots and shared memory."""
    return min(limits.max_blocks,
               limits.max_warps // (layout.compute_warps + layout.memory_warps),
               limits.shared_per_sm // (layout.shared_bytes + limits.reserved_per_block))


def min_blocks(layout: BlockLayout, limits: SmLimits) -> int:
    """The kernel's __launch_bounds__ minimum of blocks per SM: the resident blocks
    the cost model assumes, as far as MIN_REGISTERS registers per thread allow (without
    it nvcc spends registers on the prologue's full rhs and fewer blocks fit)."""
    by_registers = limits.registers // (layout.threads * MIN_REGISTERS)
    return max(1, min(resident_blocks(layout, limits), by_registers))


def stage_rate(groups, layout: BlockLayout, limits: SmLimits) -> float:
    """Trajectory-stages per cycle on one SM (see the module docstring)."""
    blocks = min(resident_blocks(layout, limits), min_blocks(layout, limits))
    if blocks < 1:
        return 0.0
    critical = layout.tiles * max(g.flops for g in groups) * limits.latency + limits.barrier
    issue = blocks * layout.tiles * sum(g.flops for g in groups) / limits.schedulers
    return blocks * layout.trajectories / max(critical, issue)


@dataclass(frozen=True)
class Design:
    """One candidate C: its groups, block and predicted rate."""

    groups: tuple[EquationGroup, ...]
    layout: BlockLayout
    rate: float


def design(rhs: RhsBlock, c: int, per_trajectory: int, structure: DbnStructure,
           steps_per_slice: int, limits: SmLimits) -> Design | None:
    groups = partition(rhs, c)
    m = memory_warps(groups, len(structure.dense), steps_per_slice, limits)
    layout = block_layout(per_trajectory, c, m, limits)
    if layout is None:
        return None
    return Design(groups, layout, stage_rate(groups, layout, limits))


def choose_c(rhs: RhsBlock, per_trajectory: int, structure: DbnStructure,
             steps_per_slice: int, limits: SmLimits = SmLimits()) -> int:
    """The C in 1..min(MAX_COMPUTE_WARPS, equations) of the highest predicted rate
    (ties: the fewer warps); 1 where no C fits the shared memory."""
    best, best_rate = 1, -1.0
    for c in range(1, min(MAX_COMPUTE_WARPS, rhs.n_equations) + 1):
        d = design(rhs, c, per_trajectory, structure, steps_per_slice, limits)
        if d is not None and d.rate > best_rate * (1 + 1e-9):
            best, best_rate = c, d.rate
    return best


# -- applicability, the choice, the source ------------------------------------------------
def not_applicable(model: KernelModel, structure: DbnStructure, precision: str,
                   device, limits: SmLimits) -> str | None:
    """Why the heterogeneous kernel cannot count this DBN, or None."""
    if device is None:
        return ("it runs on the GPU only (named barriers); the CPU path builds the "
                "homogeneous kernel for the host")
    if not model.n_states:
        return f"model {model.ode.network.id!r} has no state variables"
    if model.atoms or model.events:
        return (f"model {model.ode.network.id!r} has events or watched switches "
                f"({len(model.events)} events, {len(model.atoms)} atoms); the heterogeneous "
                f"kernel integrates without them")
    per = bytes_per_trajectory(model, structure, precision)
    if 32 * per > limits.shared_per_block:
        return (f"32 trajectories need {32 * per} bytes of shared memory, more than the "
                f"{limits.shared_per_block} of a block")
    return None


@dataclass(frozen=True)
class HeterogeneousKernel:
    source: KernelSource  # the counting kernel
    groups: tuple[EquationGroup, ...]
    layout: BlockLayout
    chosen_by: str  # "cost model" or "--warps"
    #: the same integration writing the outputs at every slice (heterogeneous.cu's
    #: values variant): the range pass where the run's values are kept
    values_source: KernelSource | None = None

    def launch_shape(self, members: int) -> tuple[int, int, int]:
        """(blocks, threads per block, dynamic shared bytes) of a launch over `members`."""
        t = self.layout.trajectories
        return (members + t - 1) // t, self.layout.threads, self.layout.shared_bytes

    def metadata(self) -> dict:
        return {"kernel": "heterogeneous", "compute_warps": self.layout.compute_warps,
                "memory_warps": self.layout.memory_warps,
                "trajectories_per_block": self.layout.trajectories,
                "shared_bytes_per_block": self.layout.shared_bytes,
                "warps_chosen_by": self.chosen_by,
                "group_flops": [g.flops for g in self.groups]}


def plan(model: KernelModel, structure: DbnStructure, counts: KernelSource, sink: CptSink,
         options, device, steps_per_slice: int) -> HeterogeneousKernel | None:
    """The heterogeneous kernel `options.kernel` asks for, or None for the homogeneous
    one. `counts`: the homogeneous count kernel (its work counts are this one's)."""
    if options.kernel == "homogeneous":
        return None
    limits = SmLimits.of(device)
    reason = not_applicable(model, structure, options.precision, device, limits)
    if reason is not None:
        if options.kernel == "heterogeneous":
            raise OptionError("kernel", f"heterogeneous: not applicable: {reason}; use "
                                        f"--kernel homogeneous (or auto)")
        return None
    n = model.n_states
    if options.kernel == "auto" and n < AUTO_MIN_EQUATIONS and not options.warps:
        return None
    rhs = RhsBlock(model)
    per = bytes_per_trajectory(model, structure, options.precision)
    if options.warps:
        if options.warps > min(MAX_COMPUTE_WARPS, n):
            raise OptionError("warps", f"{options.warps} compute warps for the {n} equations "
                                       f"of model {model.ode.network.id!r}: at most "
                                       f"{min(MAX_COMPUTE_WARPS, n)}")
        c, chosen_by = options.warps, "--warps"
    else:
        c, chosen_by = choose_c(rhs, per, structure, steps_per_slice, limits), "cost model"
    chosen = design(rhs, c, per, structure, steps_per_slice, limits)
    if chosen is None:  # not_applicable checked that one tile fits
        raise OptionError("warps", f"{c} compute warps: no block fits the shared memory")
    source = generate(model, sink, counts, rhs, chosen.groups, chosen.layout, limits)
    values = generate(model, sink, counts, rhs, chosen.groups, chosen.layout, limits,
                      values=True)
    return HeterogeneousKernel(source, chosen.groups, chosen.layout, chosen_by, values)


def generate(model: KernelModel, sink: CptSink, counts: KernelSource, rhs: RhsBlock,
             groups, layout: BlockLayout, limits: SmLimits = SmLimits(),
             values: bool = False) -> KernelSource:
    """kernels/heterogeneous.cu rendered for these groups and this block (`values`:
    its values variant, for the range pass)."""
    precision = counts.precision
    context = kernel_context(model, "rk4", precision, sink=sink,
                             block_size=layout.threads).values
    printer = _shared_printer(model, precision)
    notes = naming.state_comments(model)
    het = {
        "trajectories": layout.trajectories, "compute_warps": layout.compute_warps,
        "memory_warps": layout.memory_warps, "shared_bytes": layout.shared_bytes,
        "entry": VALUES_ENTRY if values else ENTRY, "values_variant": values,  # (het.values would be the dict method in jinja)
        "slots": SLOTS, "min_blocks": min_blocks(layout, limits),
        "groups": [_group_context(g, rhs, printer, notes) for g in groups],
    }
    text = render(*TEMPLATE, **context, het=het)
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    safe = re.sub(r"[^A-Za-z0-9_]", "_", model.ode.network.id or "model")[:40]
    kind = "values" if values else "het"
    return dataclasses.replace(
        counts, name=f"dbn_{kind}_{safe}_c{layout.compute_warps}_{precision}_{digest}.cu",
        text=text, kernel=VALUES_ENTRY if values else ENTRY)


def _shared_printer(model: KernelModel, precision: str) -> CudaPrinter:
    """model_printer's symbols with x and p read from shared memory: the trajectory's
    column of [variable][trajectory] arrays (x, p point at its first element)."""
    base = model_printer(model, precision)
    symbols = dict(base.symbols)
    symbols.update({x: f"x[{i} * DBN_T]" if i else "x[0]" for i, x in enumerate(model.x)})
    symbols.update({p: f"p[{j} * DBN_T]" if j else "p[0]"
                    for j, p in enumerate(model.p_symbols)})
    return CudaPrinter(symbols, precision, unmapped="raise")


def _group_context(group: EquationGroup, rhs: RhsBlock, printer: CudaPrinter,
                   notes: list[str]) -> dict:
    temps = rhs.block.temporaries
    sub = CseBlock(tuple(temps[k] for k in group.temporaries),
                   tuple(rhs.block.outputs[i] for i in group.equations))
    lines, values = sub.render(printer, where=f"rates (group {group.index})")
    body = lines + [f"dx[{m}] = {value}; /* {notes[i]} */"
                    for m, (i, value) in enumerate(zip(group.equations, values))]
    return {"index": group.index, "flops": group.flops,
            "equations": [{"state": i, "slot": m, "id": notes[i]}
                          for m, i in enumerate(group.equations)],
            "body": "\n".join("    " + line for line in body)}
