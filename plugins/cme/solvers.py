"""Solvers of A p = 0, sum p = 1 for a CME generator A, written once over an Engine
(cpu_engine.py: scipy; gpu_engine.py: CUDA kernels) so that both paths run the same
algorithm and stop by the same test.

- `jacobi`: Jacobi sweeps with periodic normalisation (Maggioni et al. 2013), damped
  (p <- (1-w) p + w J(p), w = `jacobi_omega`, 0.9 by default): undamped Jacobi never
  converges on a bipartite chain — every network whose reactions change the total
  count by one, a birth-death process included — because its iteration matrix has
  the eigenvalue -1 there (the iterate oscillates between two vectors).
- `aggregation`: multilevel aggregation V-cycles (aggregation.py) with damped Jacobi
  as the smoother, their iterates combined by Anderson acceleration (`accelerate`):
  the slow modes of a CME chain (a bistable switch flipping between its two states,
  say) are the ones Jacobi cannot damp and a coarse chain sees at once.
- `idr`: IDR(s) (Sonneveld and van Gijzen 2008; the biorthogonal variant of van
  Gijzen and Sonneveld 2011, ACM TOMS 38(1) Algorithm 913) on the Jacobi-
  preconditioned system (I - J^k) p = 0, J the damped Jacobi sweep and k
  `idr_sweeps`: a Krylov method with short recurrences, so its memory is 3s + 11
  vectors whatever the run's length, built from the engine's sweeps, dot products
  (four a pass) and linear combinations (eight vectors a pass). It checks the
  residual once per s + 1 applications ((s + 1) k sweeps), and stops before an
  application would pass `max_sweeps`. Measured on the CPU
  (benchmarks/cme_solver_study.py): 2.3-11x fewer sweeps than Jacobi on the toggle
  switch and the Schnakenberg limit cycle; BiCGStab on the same operator took
  1.2-2.1x IDR's sweeps on the switch and broke down on the limit cycle.
- `auto` (the default): IDR(s); if it stops short of the tolerance (a breakdown,
  stagnation), damped Jacobi from its best iterate where that is a distribution, else
  from the start. Measured on the H100 (docs/benchmarks.md), IDR took 0.69-4.5 s to
  1e-8 where the earlier auto (Jacobi, handing a slow run over to aggregation) took
  1.5-3.6 s or failed in 30-45 s on three of the four models; aggregation stays the
  faster solver on the 10^7-state toggle switch (2.6 s against 4.5 s) and is there by
  name. `Solution.solver` names the path taken, e.g. "idr>jacobi".

Stopping test, checked every `check_every` sweeps (Jacobi) or every cycle: the
normalised residual ||A p||_inf / (||A||_inf ||p||_inf) <= tol (the paper's), with p
normalised first. Stagnation: `stagnation` checks that improve the best residual by
less than 1 %. A run that stops unconverged raises ConvergenceError with the residual and
iterations reached (never a silent answer); the partial solution rides on the error.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from sbmlgpu.errors import SimulationError

SOLVERS = ("auto", "jacobi", "aggregation", "idr")
#: aggregation gives up when a cycle leaves the residual this many times its best
DIVERGED = 100.0
#: an accelerated cycle this many times worse than the best restarts the acceleration
RESTART = 30.0
#: restarts after which aggregation goes on without acceleration
MAX_RESTARTS = 3
#: how negative (relative to the largest entry) a probability may come out of the
#: Krylov solver and still be rounding; results clip it to 0 (program.py)
NEGATIVE_TOLERANCE = 1e-6
#: the residual the progress bar is shown for a passing iterate that is not a
#: distribution: just above tol (a tenth of a decade)
NOT_AN_ANSWER = 10 ** 0.1
#: a phase stagnates when `stagnation` checks improve its best residual by less than 1 %
STAGNANT = 0.99


class ConvergenceError(SimulationError):
    """The solver stopped before its tolerance: `residual`, `iterations`, `solution`
    (the last iterate, a Solution) say how far it got. Exit status 1 on the command
    line (a run that failed), not 2 (bad input)."""

    exit_code = 1

    def __init__(self, message: str, solution: "Solution"):
        super().__init__(message)
        self.solution = solution
        self.residual = solution.residual
        self.iterations = solution.iterations


@dataclass
class SolverSettings:
    solver: str = "auto"
    tol: float = 1e-8
    max_sweeps: int = 1_000_000  # Jacobi sweeps, all phases together
    max_cycles: int = 5_000  # aggregation V-cycles
    max_seconds: float = math.inf
    check_every: int = 100  # Jacobi sweeps between two normalisations + residual checks
    stagnation: int = 50  # checks without progress before giving up
    omega: float = 0.7  # damping of the aggregation smoother
    jacobi_omega: float = 0.9  # damping of the Jacobi solver (1: undamped, see above)
    smooth_sweeps: int = 4  # pre- and post-smoothing sweeps per level
    accelerate: int = 0  # V-cycle iterates Anderson acceleration combines (0: none)
    idr_shadow: int = 4  # s, the dimension of IDR(s)'s shadow space
    idr_sweeps: int = 8  # k, Jacobi sweeps in one application of IDR's operator I - J^k


@dataclass
class Solution:
    p: Any  # the engine's vector (normalised)
    residual: float  # ||A p||_inf / (||A||_inf ||p||_inf)
    residual_l1: float  # ||A p||_1
    iterations: int  # Jacobi sweeps + V-cycles, see sweeps and cycles
    sweeps: int
    cycles: int
    solver: str  # what ran, e.g. "jacobi" or "jacobi>aggregation"
    converged: bool
    seconds: float
    history: list[tuple[str, int, float, float]] = field(default_factory=list)
    # (phase, iteration in phase, seconds since start, residual)


class _Run:
    """The state of one solve: the iterate, counters, the residual history."""

    def __init__(self, engine, settings: SolverSettings, progress: Callable | None):
        self.engine, self.settings = engine, settings
        self.progress = progress
        self.start = time.perf_counter()
        self.sweeps = self.cycles = 0
        self.phases: list[str] = []
        self.history: list[tuple[str, int, float, float]] = []
        self.residual = math.inf
        self.residual_l1 = math.inf
        #: whether the last iterate checked is a distribution (_Run.check)
        self.distribution = False
        self.stop_reason: str | None = None  # why the last phase gave up, when it says
        #: IDR's best-residual iterate among those that were distributions (auto's
        #: start for Jacobi when IDR stops short)
        self.best_distribution = None

    def check(self, p, phase: str, iteration: int) -> float:
        """The normalised residual of p (normalised first, in place), and whether p is
        a probability vector up to rounding (`distribution`): a small residual alone
        does not say so, since a vector dominated by a slow mode (the difference of a
        switch's two states, say: zero sum, A v = lambda v with lambda tiny) has a
        small normalised residual too. Both come from one pass over p on the device."""
        engine = self.engine
        total = engine.normalise(p)
        r_inf, r_l1, p_inf, negative = engine.residual(p)
        denominator = engine.norm_inf * p_inf
        # no transitions at all (one reachable state, or none that can fire): A = 0,
        # A p = 0 exactly and p is the answer, not an infinite residual
        self.residual = r_inf / denominator if denominator > 0 else \
            (0.0 if r_inf == 0 and p_inf > 0 else math.inf)
        self.residual_l1 = r_l1
        self.distribution = bool(total > 0 and negative <= NEGATIVE_TOLERANCE * p_inf)
        self.history.append((phase, iteration, self.elapsed, self.residual))
        if self.progress is not None:
            # an iterate that is not a distribution is not the answer, however small
            # its residual: the bar stops short of the end for it
            shown = self.residual if self.distribution or self.residual > self.settings.tol \
                else NOT_AN_ANSWER * self.settings.tol
            self.progress(phase, iteration, shown)
        return self.residual

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def out_of_time(self) -> bool:
        return self.elapsed > self.settings.max_seconds

    def stagnated(self) -> bool:
        """The last `stagnation` checks of this phase brought the best residual down by
        less than STAGNANT (slow but steady progress is left to the iteration and time
        limits; this catches an iteration that no longer moves, or goes round)."""
        k = self.settings.stagnation
        phase = self.history[-1][0]
        mine = [h[3] for h in self.history if h[0] == phase]
        return len(mine) > k and not min(mine[-k:]) < STAGNANT * min(mine[:-k])

    def solution(self, p, converged: bool) -> Solution:
        return Solution(p, self.residual, self.residual_l1, self.sweeps + self.cycles,
                        self.sweeps, self.cycles, ">".join(self.phases), converged,
                        self.elapsed, self.history)


def solve(engine, p0: np.ndarray, settings: SolverSettings,
          progress: Callable[[str, int, float], None] | None = None) -> Solution:
    """Solve A p = 0, sum p = 1 from p0; ConvergenceError if `settings` stop it first."""
    if settings.solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, not {settings.solver!r}")
    run = _Run(engine, settings, progress)
    p = engine.vector(p0)
    if run.check(p, "start", 0) <= settings.tol:
        run.phases.append("none")
        return run.solution(p, True)
    if settings.solver == "aggregation":
        p, done = _aggregation(run, p)
        return _finish(run, p, done)
    if settings.solver == "idr":
        p, done = _idr(run, p)
        return _finish(run, p, done)
    if settings.solver == "jacobi":
        p, done = _jacobi(run, p)
        return _finish(run, p, done)
    best, done = _idr(run, p)  # auto
    if done or _limits_reached(run):
        return _finish(run, best, done)
    # IDR stopped short: Jacobi, which converges on every irreducible chain, from the
    # best of IDR's iterates that was a distribution, else from the start (a Krylov
    # iterate need not be one: Jacobi from it would converge to the answer times a
    # weighted sum that may be ~0)
    p = run.best_distribution if run.best_distribution is not None else engine.vector(p0)
    run.best_distribution = None
    p, done = _jacobi(run, p)
    return _finish(run, p, done)


def _limits_reached(run: _Run) -> bool:
    s = run.settings
    return (run.out_of_time() or run.sweeps >= s.max_sweeps or run.cycles >= s.max_cycles
            or not math.isfinite(run.residual))


def _jacobi(run: _Run, p):
    """Jacobi until converged (True) or stopped (False)."""
    s = run.settings
    run.phases.append("jacobi")
    start_sweeps = run.sweeps
    while True:
        steps = min(s.check_every, s.max_sweeps - run.sweeps)
        if steps <= 0:
            return p, False
        p = run.engine.jacobi(p, steps, s.jacobi_omega)
        run.sweeps += steps
        residual = run.check(p, "jacobi", run.sweeps - start_sweeps)
        if residual <= s.tol:
            return p, True
        if not math.isfinite(residual) or run.out_of_time() or run.stagnated():
            return p, False


def _aggregation(run: _Run, p):
    """V-cycles until converged (True) or given up (False), returning the best iterate.
    Gives up on stagnation, on a residual that is not finite, and on divergence (a
    residual DIVERGED times the best): the V-cycle is not a contraction on every
    chain (measured: the Schnakenberg limit cycle, docs/cme.md)."""
    s = run.settings
    run.phases.append("aggregation")
    levels = run.engine.levels()
    best, best_residual = p, run.residual
    anderson = Anderson(run.engine, s.accelerate)
    while run.cycles < s.max_cycles:
        g = _vcycle(levels, 0, p, s)
        run.engine.normalise(g)
        p = anderson.step(p, g)
        run.cycles += 1
        residual = run.check(p, "aggregation", run.cycles)
        if residual <= s.tol:
            return p, True
        if residual < best_residual:
            best, best_residual = p, residual
        if anderson.depth > 1 and residual > RESTART * best_residual:
            # the accelerated iterates threw the residual far back (measured on a
            # bistable lattice: 650 times its best): restart from the best iterate
            # with an empty window; after MAX_RESTARTS, plain cycles from there on
            anderson.restarts += 1
            anderson.reset()
            if anderson.restarts >= MAX_RESTARTS:
                anderson.depth = 0
            p = best
            continue
        if residual > DIVERGED * best_residual:
            run.stop_reason = (f"divergence of the aggregation cycles (residual {residual:.3g}"
                               f", {DIVERGED:g} times their best {best_residual:.3g})")
            break
        if not math.isfinite(residual) or run.out_of_time() or run.stagnated():
            break
    if best is not p:
        run.check(best, "aggregation", run.cycles)  # the residual reported is the best's
    return best, False


def _idr(run: _Run, p):
    """IDR(s) on F(x) = x - J^k(x) = 0 from p (see the module's docstring) until
    converged (True) or stopped (False), returning the best iterate.

    The check (one per s + 1 applications of F) is the solvers' test on a normalised
    copy of x itself, never on the recursive residual r, so drift between the two
    cannot pass for convergence."""
    s, e = run.settings, run.engine
    run.phases.append("idr")
    k = s.idr_sweeps
    # s random vectors of an n-state space are independent only for s < n
    dim = max(1, min(s.idr_shadow, _length(p) - 1))
    best, best_residual = p, run.residual
    run.best_distribution, best_distribution_residual = (p, run.residual) \
        if run.distribution else (None, math.inf)
    probe = p  # the last iterate checked

    def room() -> bool:  # whether one more application of F stays within max_sweeps
        return run.sweeps + k <= s.max_sweeps

    def apply(v):  # F(v) = v - J^k v
        run.sweeps += k
        return e.combine([1.0, -1.0], [v, e.jacobi(v, k, s.jacobi_omega)], clip=False)

    if not room():
        return best, False
    shadow = _shadow_space(e, p, dim)
    x = p
    r = e.combine([-1.0], [apply(x)], clip=False)
    zeros = e.combine([0.0], [r], clip=False)
    g, u = [zeros] * dim, [zeros] * dim  # entries are replaced, never written in place
    m = np.eye(dim)
    omega = 1.0
    while True:
        f = np.array(e.dots([(q, r) for q in shadow]))
        for j in range(dim):
            if not room():
                return _idr_best(run, best, probe)
            # a vector of the next Sonneveld space: r minus its part along G[j:]
            c = np.linalg.solve(m[j:, j:], f[j:])
            v = e.combine([1.0, *(-c)], [r, *g[j:]], clip=False)
            u[j] = e.combine([*c, omega], [*u[j:], v], clip=False)
            g[j] = apply(u[j])
            # G[j] made biorthogonal to the first j shadow vectors: the modified
            # Gram-Schmidt of Algorithm 913 from one pass of products, since
            # P_i . (g - sum_l alpha_l G_l) = raw_i - sum_l M[i, l] alpha_l with M's
            # lower triangle known (P_i . G_l = 0 for i < l)
            raw = np.array(e.dots([(q, g[j]) for q in shadow]))
            if j:
                alpha = np.linalg.solve(np.tril(m[:j, :j]), raw[:j])
                g[j] = e.combine([1.0, *(-alpha)], [g[j], *g[:j]], clip=False)
                u[j] = e.combine([1.0, *(-alpha)], [u[j], *u[:j]], clip=False)
                raw[j:] -= m[j:, :j] @ alpha
            m[j:, j] = raw[j:]
            if m[j, j] == 0 or not math.isfinite(m[j, j]):
                run.stop_reason = "a breakdown of IDR(s) (a zero pivot)"
                return _idr_best(run, best, probe)
            beta = f[j] / m[j, j]
            r = e.combine([1.0, -beta], [r, g[j]], clip=False)
            x = e.combine([1.0, beta], [x, u[j]], clip=False)
            f[j + 1:] -= beta * m[j + 1:, j]
        # the step into the next space: minimise the residual along F(r)
        if not room():
            return _idr_best(run, best, probe)
        t = apply(r)
        tt, tr, rr = e.dots([(t, t), (t, r), (r, r)])
        cosine = abs(tr) / (math.sqrt(tt) * math.sqrt(rr)) if tt > 0 and rr > 0 else 0.0
        if cosine > 0 and math.isfinite(cosine):
            omega = tr / tt
            if cosine < 0.7:  # "maintaining the convergence" (Sleijpen and van der Vorst)
                omega *= 0.7 / cosine
            x = e.combine([1.0, omega], [x, r], clip=False)
            r = e.combine([1.0, -omega], [r, t], clip=False)
        elif rr != 0:  # r = 0 exactly: x solves it, the check below says so
            run.stop_reason = "a breakdown of IDR(s) (F r = 0 or orthogonal to r)"
            return _idr_best(run, best, probe)
        # the test on a normalised copy: x itself is left as the recurrences made it
        # (its sum swings, even below 0, before it settles on a positive multiple of
        # the answer: the component along the null vector is fixed by x0's weighted sum)
        probe = e.combine([1.0], [x], clip=False)
        residual = run.check(probe, "idr", run.sweeps)
        if residual <= s.tol and run.distribution:
            return probe, True
        if residual < best_residual:
            best, best_residual = probe, residual
        if run.distribution and residual < best_distribution_residual:
            run.best_distribution, best_distribution_residual = probe, residual
        if not math.isfinite(residual):
            run.stop_reason = "a residual that is not finite"
            return _idr_best(run, best, probe)
        if run.out_of_time() or run.stagnated():
            return _idr_best(run, best, probe)


def _length(v) -> int:
    return v.n if hasattr(v, "n") else len(v)


def _idr_best(run: _Run, best, last):
    if best is not last:
        run.check(best, "idr", run.sweeps)  # the residual reported is the best's
    return best, False


def _shadow_space(engine, like, dim: int, seed: int = 20130101) -> list:
    """IDR's s shadow vectors: random (a fixed seed, so a rerun takes the same path),
    orthonormalised by Gram-Schmidt on the engine, one host vector at a time. Uniform
    single-precision draws: any generic vectors serve, and Gaussian doubles took 0.8 s
    of a 6 s solve at 8.7 million states (measured on the H100's host)."""
    n = _length(like)
    rng = np.random.default_rng(seed)
    basis: list = []
    for _ in range(dim):
        q = engine.vector(rng.random(n, dtype=np.float32) - np.float32(0.5))
        for b in basis:
            q = engine.combine([1.0, -engine.dot(b, q)], [q, b], clip=False)
        q = engine.combine([1.0 / math.sqrt(engine.dot(q, q))], [q], clip=False)
        basis.append(q)
    return basis


class Anderson:
    """Anderson acceleration of a fixed-point iteration p -> G(p) (here a V-cycle):
    of the last `depth` pairs (G(p_j), f_j = G(p_j) - p_j), the combination
    sum a_j G(p_j) with sum a_j = 1 that minimises ||sum a_j f_j||_2 (Walker and Ni,
    SIAM J. Numer. Anal. 49(4), 2011; De Sterck et al. accelerate aggregation for
    Markov chains the same way). Where the combination is not positive, a hundredth
    of the newest V-cycle iterate stands (engine.combine, cpu_engine.FLOOR). Measured
    on the CPU: the toggle switch at 150 x 150 took 178 plain V-cycles, 93 with 4
    iterates; a bistable 51 x 51 lattice 186 and 55. A combination with a weight above MAX_WEIGHT (the f_j nearly
    dependent) is not taken: the window restarts from the newest pair."""

    MAX_WEIGHT = 1e3

    def __init__(self, engine, depth: int):
        self.engine, self.depth = engine, depth
        self.restarts = 0
        self.reset()

    def reset(self) -> None:
        self.g: list = []
        self.f: list = []
        self.gram = np.zeros((0, 0))

    @property
    def active(self) -> bool:
        """Whether the last step combined several iterates."""
        return len(self.g) > 1

    def step(self, p, g):
        if self.depth < 2:
            return g
        e = self.engine
        f = e.combine([1.0, -1.0], [g, p], clip=False)
        if len(self.g) == self.depth:
            self.g, self.f, self.gram = self.g[1:], self.f[1:], self.gram[1:, 1:]
        row = np.array([e.dot(f, old) for old in self.f] + [e.dot(f, f)])
        k = len(self.f)
        gram = np.zeros((k + 1, k + 1))
        gram[:k, :k] = self.gram
        gram[k, :], gram[:, k] = row, row
        self.g, self.f, self.gram = self.g + [g], self.f + [f], gram
        if k == 0:
            return g
        m = k + 1
        kkt = np.zeros((m + 1, m + 1))
        kkt[:m, :m] = gram + 1e-12 * np.trace(gram) * np.eye(m)
        kkt[:m, m] = kkt[m, :m] = 1.0
        rhs = np.zeros(m + 1)
        rhs[m] = 1.0
        try:
            weights = np.linalg.solve(kkt, rhs)[:m]
        except np.linalg.LinAlgError:
            weights = None
        if weights is None or not np.all(np.isfinite(weights)) \
                or np.abs(weights).max() > self.MAX_WEIGHT:
            self.g, self.f, self.gram = [g], [f], gram[-1:, -1:]
            return g
        return e.combine(list(weights), self.g, clip=True)


def _vcycle(levels, k: int, p, s: SolverSettings):
    level = levels[k]
    if k == len(levels) - 1:
        return level.vector_like(coarsest_solution(level.dense()))
    p = level.smooth(p, s.smooth_sweeps, s.omega)
    pc = level.coarsen(p)
    qc = _vcycle(levels, k + 1, pc, s)
    p = level.prolong(p, qc, pc)
    return level.smooth(p, s.smooth_sweeps, s.omega)


def coarsest_solution(a: np.ndarray) -> np.ndarray:
    """The stationary vector of a small dense generator: A q = 0 with the last row
    replaced by sum q = 1 (by LU; least squares when that is singular, so a reducible
    chain still gives an answer), negatives from rounding clipped."""
    n = len(a)
    m = a.copy()
    m[-1, :] = 1.0
    b = np.zeros(n)
    b[-1] = 1.0
    try:  # LU: a tenth of the time of least squares, which is only the fallback
        q = np.linalg.solve(m, b)
        if not np.all(np.isfinite(q)):
            raise np.linalg.LinAlgError("not finite")
    except np.linalg.LinAlgError:
        q = np.linalg.lstsq(m, b, rcond=None)[0]
    q = np.clip(q, 0.0, None)
    total = q.sum()
    return q / total if total > 0 else np.full(n, 1.0 / n)


#: what a stopped run's message suggests instead
_OTHER_SOLVER = {"jacobi": "--solver auto", "aggregation": "--solver auto",
                 "idr": "--solver aggregation", "auto": "--solver aggregation"}


def _finish(run: _Run, p, converged: bool) -> Solution:
    solution = run.solution(p, converged)
    if converged:
        return solution
    s = run.settings
    why = (run.stop_reason if run.stop_reason and run.phases[-1] in ("aggregation", "idr") else
           "the time limit" if run.out_of_time() else
           f"stagnation (less than 1 % progress over {s.stagnation} checks)" if run.history and run.stagnated() else
           "a residual that is not finite" if not math.isfinite(run.residual) else
           "the iteration limit")
    raise ConvergenceError(
        f"the {solution.solver} solver stopped at {why} after {run.sweeps} Jacobi sweeps "
        f"and {run.cycles} aggregation cycles ({run.elapsed:.3g} s): normalised residual "
        f"{run.residual:.3g} > tol {s.tol:g}, ||A p||_1 = {run.residual_l1:.3g}. Try "
        f"{_OTHER_SOLVER[s.solver]}, a "
        "larger --max-sweeps/--max-cycles/--max-seconds, or a looser --tol.",
        solution)
