"""Options of the `ode` backend (the CLI turns each into `--name-with-dashes`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from sbmlgpu.backend import BackendOptions, option
from sbmlgpu.errors import OptionError
from sbmlgpu.ode.kernel_source import DEFAULT_HISTORY_NODES

METHODS = ("auto", "rk4", "dopri5", "rodas4", "bdf")
PRECISIONS = ("double", "float")
CPU_ENGINES = ("auto", "native", "numpy")
JACOBIANS = ("auto", "analytic", "fd")

#: tolerances used when --rtol/--atol are not given, by precision: float32 cannot
#: resolve a relative error much below its epsilon (1.2e-7).
DEFAULT_TOLERANCES = {"double": (1e-8, 1e-10), "float": (1e-5, 1e-7)}
#: libRoadRunner's CVODE step limit per output interval (see --max-steps-per-interval)
DEFAULT_MAX_STEPS_PER_INTERVAL = 20_000
#: the first pass's step budget (see --pass-steps)
DEFAULT_PASS_STEPS = 10_000


@dataclass
class OdeOptions(BackendOptions):
    method: str = option(
        "auto", "integrator: rk4 (fixed step --dt), dopri5 (Dormand-Prince 5(4), adaptive, "
                "non-stiff), rodas4 (Rosenbrock, adaptive, stiff; analytic Jacobian), bdf "
                "(variable-order backward differentiation, stiff; keeps the Jacobian and its "
                "LU from step to step: for many steps or large systems), auto "
                "(rodas4 if the Jacobian, at the initial state of up to 2,048 members or "
                "along eight members' trajectories, says the ensemble is stiff over the time "
                "span, else dopri5; where stiff, members past --pass-steps run again with "
                "bdf, and on the CPU path an ensemble of 512 or more members runs with bdf "
                "where a timed trial of 32 members finds it faster and failing no more "
                "of them)", choices=METHODS)
    dt: float = option(1e-3, "step of rk4 (each output interval is split into "
                             "ceil(interval/dt) equal steps)", minimum=0.0)
    rtol: float | None = option(None, "relative tolerance of the adaptive methods "
                                      "[default: 1e-8 in double, 1e-5 in float]", minimum=0.0)
    atol: float | None = option(None, "absolute tolerance of the adaptive methods, in the units of "
                                      "each state [default: 1e-10 in double, 1e-7 in float]",
                                minimum=0.0)
    scaled_atol: bool = option(
        True, "a state whose initial value is nonzero but below atol / rtol is held to "
              "rtol x |its initial value| instead of atol, per member (never looser than "
              "atol): under atol alone such a value is noise to the error control, and "
              "where it grows by many orders (a species that starts at 1e-20 and grows "
              "logistically) the stiff methods' long steps can give it a wrong growth "
              "factor. libRoadRunner also scales its absolute tolerance by the initial "
              "values. off: atol for every state")
    max_steps: int = option(1_000_000, "most steps (accepted or rejected) per trajectory; "
                                       "past it the member's status is max_steps", minimum=1)
    max_steps_per_interval: int = option(
        DEFAULT_MAX_STEPS_PER_INTERVAL,
        "most steps (accepted or rejected) of the adaptive methods between two output times, as "
        "CVODE's mxstep; past it the member's status is max_steps_per_interval. The "
        "default is libRoadRunner's (20000), not CVODE's 500: stiff SBML models need "
        "thousands of steps in one interval where a fast transient starts, while a member "
        "that needs more is usually a parameter set where the model is extremely stiff "
        "or runs away, which CVODE under libRoadRunner gives up on too. 0: no limit "
        "(rk4 has none: its steps per interval are fixed by --dt)", minimum=0)
    member_time_limit: float = option(
        0.0, "wall-clock seconds one member may integrate; past it the member stops with "
             "status time_limit and the rest of the ensemble finishes (checked every few "
             "steps with the GPU's global timer, or a steady clock on the CPU path). Which "
             "members hit it depends on the machine and its load, so results are "
             "reproducible only without it. 0: no limit", minimum=0.0)
    pass_steps: int = option(
        DEFAULT_PASS_STEPS,
        "step budget of a first pass over the ensemble: members that need more steps "
        "stop there and run again from the start in a second pass over them alone, so "
        "that a few slow members no longer hold a warp of fast ones (the results are "
        "those of a single pass, member for member, except under --method auto where "
        "stiff: there the second pass runs bdf). The default is ~8x the largest step "
        "count of well-behaved members of the PEtab models measured (hundreds to ~1,300): "
        "such members finish in the first pass, and a slow member repeats at most this "
        "many steps. the adaptive methods only (rk4's steps are fixed by --dt). 0 (or not below "
        "--max-steps): one pass", minimum=0)
    h0: float = option(0.0, "first step of the adaptive methods (0: chosen from the model, "
                            "Hairer's starting-step heuristic)", minimum=0.0)
    max_step: float = option(0.0, "largest step of the adaptive methods (0: no limit; with events "
                                  "or piecewise switches it is at most 1/50 of the time "
                                  "span, so that a trigger that turns on and off again "
                                  "within one step is not missed)", minimum=0.0)
    precision: str = option("double", "floating-point precision of the kernel",
                            choices=PRECISIONS)
    fast_math: bool = option(False, "compile with nvcc --use_fast_math (approximate "
                                    "division, sqrt, exp, log, flush denormals to zero); "
                                    "only for float")
    jacobian: str = option("auto", "Jacobian of rodas4 and bdf: analytic (sympy), fd (forward "
                                   "differences in the kernel), auto (analytic unless it "
                                   "cannot be printed)", choices=JACOBIANS)
    bundling: bool = option(True, "pilot run, then sort members by predicted step count "
                                  "so each warp holds similar work (Kovac et al. 2019); "
                                  "only for adaptive methods and ensembles larger than "
                                  "10x the pilot")
    lane_refill: bool = option(True, "GPU: each thread integrates members one after "
                                     "another, taking the next from a queue as soon as "
                                     "its own ends, a step per turn, so that a warp's "
                                     "lanes do not idle until its slowest member ends; "
                                     "off: one member per thread (rk4 without events, "
                                     "piecewise switches, delay() or fast reactions "
                                     "always: its members take equal steps)")
    max_lanes: int = option(0, "GPU, lanes that refill: at most this many lanes, in whole "
                               "blocks and at least one block (0: as many threads as the "
                               "GPU holds at once). A large model's "
                               "kernel keeps each lane's arrays in local memory (e.g. 7 KB "
                               "a thread for 33 states): fewer lanes may keep them in the "
                               "L2 cache, or run slower (Lucarelli on an H200: 8,448 lanes "
                               "1.3x slower than uncapped); measure before relying on "
                               "it (not chosen automatically)", minimum=0)
    pilot_size: int = option(1000, "members of the bundling pilot run", minimum=32)
    block_size: int = option(128, "threads per block", minimum=32, maximum=1024)
    threads_per_gpu: int = option(2, "host threads that take batches for each GPU: while "
                                     "one waits for its launch, another does its host "
                                     "work (Python, page faults, copies out of pinned "
                                     "memory; copies to and from the GPU still wait for "
                                     "the other's kernel); a run of few batches leaves "
                                     "the others idle (10^7 Lorenz "
                                     "members on an H100: 0.26 s with 1, 0.18-0.20 s "
                                     "with 2, 0.17-0.18 s with 3); the PEtab objective's "
                                     "reduction keeps 1", minimum=1, maximum=8)
    cpu_engine: str = option(
        "auto", "CPU path: native (the generated integrator compiled for the host with "
                "g++ and OpenMP), numpy (vectorised over members; rk4 and dopri5 without "
                "events), auto (native if a C++ compiler is found)", choices=CPU_ENGINES)
    quantile_bins: int = option(4096, "histogram bins per output column for the on-GPU "
                                      "quantiles of --summary (each block counts in shared "
                                      "memory: 4 bytes per bin)", minimum=16,
                                maximum=1 << 14)
    history_nodes: int = option(DEFAULT_HISTORY_NODES,
                                "models with delay(): (t, x, dx/dt) nodes of the past kept "
                                "per member (a ring in global memory, counted per member "
                                "when batches are sized: 8 x (1 + 2 x states) bytes each, at "
                                "most 448 KB); a member whose look-up needs "
                                "an overwritten node fails: raise it for long lags or many "
                                "events within a lag [default 0: 1024, fewer where they "
                                "would take more than 64 KB]", minimum=0, maximum=1 << 20)
    spill_bytes: int = option(2 << 30, "full time courses larger than this are written to "
                                       "a memory-mapped file (in $TMPDIR) instead of host "
                                       "memory", minimum=0)
    #: internal (no CLI flag): a method that --method auto chose, kept for later runs
    #: (sbmlgpu.petab.objective's calls after its first): its members past --pass-steps
    #: still run again with auto's later method (passes.later_method), so that every
    #: call integrates each member as the first did
    later_as_auto: bool = field(default=False, repr=False,
                                metadata={"cli": False, "help": "", "internal": True})

    def check(self) -> None:
        if not self.dt > 0:
            raise OptionError("dt", f"{self.dt!r} must be positive")
        for name in ("rtol", "atol"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise OptionError(name, f"{value!r} must be positive")
        if self.rtol is not None and self.rtol < 1e-14:
            raise OptionError("rtol", f"{self.rtol!r}: float64 cannot deliver less than 1e-14")
        if self.fast_math and self.precision != "float":
            raise OptionError("fast-math", "only with --precision float (--use_fast_math "
                                           "changes float arithmetic only)")
        if not math.isfinite(self.member_time_limit):
            raise OptionError("member-time-limit", f"{self.member_time_limit!r} is not a "
                                                   "number of seconds (0: no limit)")
        if self.block_size % 32:
            raise OptionError("block-size", f"{self.block_size} is not a multiple of 32 "
                                            "(a warp)")

    @property
    def tolerances(self) -> tuple[float, float]:
        rtol, atol = DEFAULT_TOLERANCES[self.precision]
        return (self.rtol if self.rtol is not None else rtol,
                self.atol if self.atol is not None else atol)
