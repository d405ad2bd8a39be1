"""`--method auto` on the CPU path: rodas4 or bdf for a stiff ensemble, by a timed trial.

Which of the two stiff methods is faster depends on the model more than on anything
the Jacobian check sees (docs/benchmarks.md, 1,000 PEtab-sampled members on 2 cores):
rodas4 (order 4 from its first step, a Jacobian and an LU every step) was 1.25-4x
faster than bdf on Raia, Bachmann, Isensee, Sneyd, Fujita and Blasi; bdf (order 1-5,
its Jacobian and LU kept over many steps) 1.3-2x faster on SalazarCavazos_MBoC2020
(75 states, an LU of 75 x 75 every rodas4 step), Liu_IFACPapersOnLine2025 and
Elowitz_Nature2000, neither by state count nor by step count alone. So where the check
says stiff and the ensemble is large enough to pay for it, TRIAL_MEMBERS members (a
fixed sample of the task's seed) run with each method under the first pass's step
budget, twice each (`choose`), and bdf is chosen where its faster run took at most
BDF_SHARE of rodas4's (a margin for the timer's noise, rodas4 being the faster on most
models measured) and it failed no more of the trial's members than rodas4 (Weber_BMC2015's
objective on 2 cores: bdf failed 24 of 300 sets where rodas4 failed 5; a pick by time
alone, tipped by the machine's load, gave the one or the other). The host
builds of both kernels are cached on disk, and the pick per model and time span
(OdeProgram._trial_picks: runs with other parameter values reuse it), so that a
repeated run pays for neither.

The choice is a measurement: on another machine, or under load, a model near the
margin may get the other method (both integrate to the same tolerances). `--method
rodas4` or `--method bdf` fixes it; the GPU keeps rodas4 (its timings are not the
host's, and a second kernel would be a second nvcc build).
"""

from __future__ import annotations

import gc
import time
from typing import Callable

import numpy as np

#: members of the trial, each method
TRIAL_MEMBERS = 32
#: the smallest ensemble that has a trial (its four runs cost ~4 x TRIAL_MEMBERS members)
TRIAL_MIN_MEMBERS = 16 * TRIAL_MEMBERS
#: bdf is chosen where its trial took at most this share of rodas4's
BDF_SHARE = 0.85
#: the methods a trial compares: the check's stiff method first
CANDIDATES = ("rodas4", "bdf")


def wanted(chosen: str, first: str, n_members: int, on_device: bool) -> bool:
    """Whether a run has a trial: --method auto, stiff (the check's rodas4), the CPU
    path, an ensemble of at least TRIAL_MIN_MEMBERS."""
    return (chosen == "auto" and first == CANDIDATES[0] and not on_device
            and n_members >= TRIAL_MIN_MEMBERS)


def sample(n_members: int, seed: int) -> np.ndarray:
    """The trial's members: TRIAL_MEMBERS of `n_members`, sorted, fixed by `seed`."""
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, 0x7121A1])
    return np.sort(rng.choice(n_members, size=min(TRIAL_MEMBERS, n_members),
                              replace=False))


def choose(run: Callable[[str, bool], int | None]) -> tuple[str, str, dict[str, float]]:
    """(method, why, seconds per method): `run(method, warm_up)` integrates the trial's
    members with that method and returns how many of them failed (a status other than
    ok or the budget's max_steps; None: not counted), one step each where `warm_up` (untimed, first: a first
    call into a freshly loaded library pays for its page faults and the OpenMP pool,
    ~10 ms on the 2-core development machine, as much as a whole trial of a model such
    as Bachmann_MSB2011, and that went to whichever method ran first)."""
    for method in CANDIDATES:
        run(method, True)
    gc.collect()  # the method check's sympy garbage, not a collection inside one timing
    seconds = {method: float("inf") for method in CANDIDATES}
    failed = {method: 0 for method in CANDIDATES}
    # each method twice, in the order A B B A, its faster time kept: a single timing of
    # each picked bdf in a new CLI process for Raia_CancerResearch2011 (rodas4 4.4 ms,
    # bdf 1.2 ms) where a loaded process measured 0.6 ms and 1.4 ms
    for method in (*CANDIDATES, *reversed(CANDIDATES)):
        started = time.perf_counter()
        count = run(method, False)
        seconds[method] = min(seconds[method], time.perf_counter() - started)
        failed[method] = max(failed[method], int(count or 0))
    stiff, other = CANDIDATES
    faster = seconds[other] <= BDF_SHARE * seconds[stiff]
    pick = other if faster and failed[other] <= failed[stiff] else stiff
    why = (f"{pick} in a timed trial of {TRIAL_MEMBERS} members on the CPU path "
           f"(rodas4 {seconds[stiff] * 1e3:.1f} ms, bdf {seconds[other] * 1e3:.1f} ms; "
           f"bdf where it takes at most {BDF_SHARE:g} of rodas4's time"
           + (f" and fails no more members: it failed {failed[other]}, rodas4 "
              f"{failed[stiff]}" if faster and failed[other] > failed[stiff] else "")
           + ")")
    return pick, why, seconds
