"""Every tuning constant of the SSA backend, in one place, with where it came from.

The automatic choices (layout, method, block size) read only these. The figures
marked PROVISIONAL are starting points from Klingbeil et al. (IEEE TPDS 2012, a GTX
260) and from register arithmetic; benchmarks/ssa_layouts.py and
benchmarks/ssa_blocks.py measure them on the H200, and docs/benchmarks.md records
the measurements that replace them.
"""

from __future__ import annotations

#: States + reactions that the "register" layout keeps in registers. A double takes
#: two of a thread's 255 registers; past about 48 values the Philox state, the
#: CSE temporaries and the loop variables no longer fit and nvcc spills to local
#: memory, which is the "thin" layout without its coalescing. PROVISIONAL.
REGISTER_MAX_VALUES = 48

#: Reactions from which "thin" beats "fat" (Klingbeil et al. 2012, Fig. 5: thin
#: matched fat on small systems and won from about 8 reactions). PROVISIONAL.
THIN_FROM_REACTIONS = 8

#: Reactions from which the optimized direct method (sorted reactions, early-exit
#: search, sparse updates) replaces the plain direct method on the GPU. PROVISIONAL:
#: the search saves O(M) work per firing only when M is large, and a warp pays for
#: its slowest lane's search and for every distinct case of the update switch.
OPTIMIZED_FROM_REACTIONS = 32

#: The same on the compiled CPU engine, where branches cost little. Measured on a
#: 2-core x86 (2026-11, benchmarks/ssa_layouts.py --cpu and a variant sweep):
#: Vilar (16 reactions) 1.19e7 firings/s optimized+sparse vs 8.6e6 direct+full;
#: decay-dimerisation (4) 1.27e7 vs 1.15e7; 24 copies (96) 1.38e7 vs 4.2e6.
CPU_OPTIMIZED_FROM_REACTIONS = 8

#: Threads per block by layout. Klingbeil et al. found 192 or 384 best on their GPU;
#: an H200 SM holds 2048 threads, so any multiple of 64 up to 1024 gives full
#: occupancy when registers allow. PROVISIONAL until benchmarks/ssa_blocks.py runs.
DEFAULT_BLOCK = {"register": 128, "fat": 128, "thin": 256}

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
#: rounds (the member fails with a message).
MAX_EVENT_ROUNDS = 64


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


def choose_method(n_reactions: int, engine: str = "gpu") -> str:
    """engine: "gpu", "compiled" (the kernel on the CPU cores) or "numpy" (whose
    vectorised loop runs the direct method fastest: the optimized method's updates
    loop over reactions in Python)."""
    if engine == "numpy":
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
