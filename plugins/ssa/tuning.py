"""Every tuning constant of the SSA backend, in one place, with where it came from.

The automatic choices (layout, method, block size) read only these. The figures
marked PROVISIONAL are starting points from Klingbeil et al. (IEEE TPDS 2012, a GTX
260) and from register arithmetic; benchmarks/ssa_layouts.py and
benchmarks/ssa_blocks.py measure them on the H200, and docs/benchmarks.md records
the measurements that replace them.
"""

from __future__ import annotations

#: States + reactions that the "register" layout keeps in registers. A double takes
#: two of a thread's 255 registers; past some size the Philox state, the CSE
#: temporaries and the loop variables no longer fit and nvcc spills to local memory.
#: Measured on an H100 (2026-11-22, benchmarks/ssa_layouts.py, decay-dimerisation
#: copies, double, direct method): the register layout was fastest at every size
#: measured, up to 12 copies = 84 values (222 registers, 0 B local): 2.57e10
#: firings/s against 7.6e9 fat and 4.2e9 thin. 96 is that measured range plus a
#: margin; larger systems go to fat or thin until a measurement says otherwise.
REGISTER_MAX_VALUES = 96

#: Reactions from which "thin" is chosen over "fat". Klingbeil et al. 2012 (GTX 260)
#: saw thin win from about 8 reactions; on the H100 fat beat thin at every size
#: measured (4 to 48 reactions: 6.7e10 vs 3.4e10 at 4, 7.6e9 vs 4.2e9 at 48), so
#: fat is kept while a block of MIN_BLOCK threads fits in shared memory and thin
#: only beyond that (see choose_layout).
THIN_FROM_REACTIONS = 10**9

#: Reactions from which the optimized direct method (sorted reactions, early-exit
#: search, sparse updates) replaces the plain direct method on the GPU. Measured on
#: the H100 (same run): with the register layout direct beat optimized at every size
#: (4 reactions 8.9e10 vs 7.2e10, 48 reactions 2.6e10 vs 1.6e10; Vilar, 16
#: reactions, 5.4e10 vs 4.0e10): a warp pays for its slowest lane's search and for
#: every distinct case of the update switch. With fat, optimized won slightly from
#: 16 reactions (2.8e10 vs 2.5e10). So: optimized only outside the register layout.
OPTIMIZED_FROM_REACTIONS = 16

#: The same on the compiled CPU engine, where branches cost little. Measured on a
#: 2-core x86 (2026-11, benchmarks/ssa_layouts.py --cpu and a variant sweep):
#: Vilar (16 reactions) 1.19e7 firings/s optimized+sparse vs 8.6e6 direct+full;
#: decay-dimerisation (4) 1.27e7 vs 1.15e7; 24 copies (96) 1.38e7 vs 4.2e6.
CPU_OPTIMIZED_FROM_REACTIONS = 8

#: Threads per block by layout. Klingbeil et al. found 192 or 384 best on their GPU.
#: Measured on an H100 (2026-11-22, benchmarks/ssa_blocks.py, decay-dimerisation):
#: within 10 % from 32 to 1024 threads in every layout; 192, 384 and 768 were the
#: slowest (e.g. register 8.5e10, 8.1e10, 8.2e10) and 256, 512, 1024 among the
#: fastest (8.9e10, 9.1e10, 9.4e10). 256 is taken: fast in every layout measured,
#: and it still fits models that need 255 registers per thread.
DEFAULT_BLOCK = {"register": 256, "fat": 256, "thin": 256}

#: Smallest block the fat layout may shrink to when its shared memory does not fit.
MIN_BLOCK = 32

#: The optimized method re-sums a0 from the stored propensities every this many
#: firings (a power of two), which bounds the rounding drift of the running sum.
OPTIMIZED_REFRESH = 256

#: Realisations, and firings each, of the presimulation that orders reactions by
#: frequency for the optimized method (Cao, Li, Petzold 2004 use a short
#: presimulation the same way).
PILOT_REALISATIONS = 32
PILOT_FIRINGS = 2000

#: Events that keep triggering each other at one instant are stopped after this many
#: firings (the member fails with a message); one event fires per round.
MAX_EVENT_ROUNDS = 1000


def choose_layout(n_states: int, n_reactions: int, real_bytes: int,
                  shared_per_block: int | None) -> str:
    """register when the state and propensities fit in registers; else fat for small
    reaction counts when a block of at least MIN_BLOCK threads fits in shared memory;
    else thin."""
    values = n_states + n_reactions
    if values <= REGISTER_MAX_VALUES:
        return "register"
    if n_reactions < THIN_FROM_REACTIONS and shared_per_block is not None \
            and values * real_bytes * MIN_BLOCK <= shared_per_block:
        return "fat"
    return "thin"


def choose_method(n_reactions: int, engine: str = "gpu", layout: str | None = None) -> str:
    """engine: "gpu", "compiled" (the kernel on the CPU cores) or "numpy" (whose
    vectorised loop runs the direct method fastest: the optimized method's updates
    loop over reactions in Python). On the GPU the register layout always takes
    the direct method (measured, see OPTIMIZED_FROM_REACTIONS)."""
    if engine == "numpy" or (engine == "gpu" and layout == "register"):
        return "direct"
    threshold = OPTIMIZED_FROM_REACTIONS if engine == "gpu" else CPU_OPTIMIZED_FROM_REACTIONS
    return "optimized" if n_reactions >= threshold else "direct"


def choose_update(layout: str, method: str, engine: str = "gpu") -> str:
    """On the GPU: full (branch-free, every propensity) where the values live in
    registers and the method is the plain direct one; sparse (dependents only) where
    each propensity is a memory access, or where the optimized method keeps a running
    a0. On the CPU always sparse: a branch costs nothing there (measured above)."""
    if engine != "gpu":
        return "sparse"
    return "full" if layout == "register" and method == "direct" else "sparse"
