"""The ode backend's words for its failed members (TimeCourseResult.messages).

The kernel returns one status code per member; the generic text of `failed` points
to the member's message, and `non_finite` did not say when. Here: the kernel's only
causes of `failed` (its event loop), for a value gone NaN or infinite the last
output time at which every output was still finite, read from the time courses, and
for a member stopped by a limit (max_steps, max_steps_per_interval, time_limit) the
output interval where it stopped and the options to try.
"""

from __future__ import annotations

import numpy as np

from sbmlgpu.results import Status

#: as many messages as a user reads; the status array has every member
MAX_MESSAGES = 20
DRAW_FAILED = ("a distrib draw had arguments outside its distribution's domain (e.g. "
               "sd <= 0, lower bound >= upper bound) or a truncation range too improbable "
               "to hit")
EVENTS_FAILED = (
    "an event could not be carried out: events triggered each other without end at one "
    "instant (more than 100,000 executions), more delayed event instances were pending "
    "than the kernel keeps, or an event's delay was negative; check the event triggers, "
    "assignments and delays")
NO_FAST_EQUILIBRIUM = ("; or (a model with fast reactions) the fast reactions reached no "
                       "equilibrium at the start or after an event (rates that grow "
                       "without bound, or too stiff to relax)")
#: the numpy CPU engine (no C++ compiler) runs implicit methods and models with events
#: member by member through the CPU reference, whose failures are its own
REFERENCE_FAILED = (
    "the CPU reference's integration failed (the numpy CPU engine, used where no C++ "
    "compiler is found, runs this model member by member through scipy's solvers: a "
    "step it could not take, e.g. at an event, more event or switch instants than it "
    "allows, or an event it could not carry out); try --method dopri5, looser "
    "--rtol/--atol, or the native engine (a C++ compiler) or a GPU, which run the "
    "generated kernel")
HISTORY_LOST = ("; or (a model with delay()) a look-up needed a past state that the "
                "history ring no longer held: raise --history-nodes")


def _non_finite(times: np.ndarray, rows: np.ndarray | None) -> str:
    text = Status.non_finite.message
    if rows is None or rows.size == 0:
        return text
    finite = np.all(np.isfinite(rows), axis=1)
    if finite.all():  # the state went bad between output times, before the next one
        return text
    k = int(np.argmin(finite))
    when = (f"already at the first output time t = {times[0]:g}" if k == 0 else
            f"between t = {times[k - 1]:g} and t = {times[k]:g}")
    return f"a state became NaN or infinite {when}: " + text.split(": ", 1)[-1]


#: --scaled-atol holds a state that starts nonzero below atol / rtol to rtol x its
#: start; where that state's rate is rounding noise (a cancellation of much larger
#: terms, e.g. a conserved total minus its parts), the steps shrink to resolve the noise
SCALED_ATOL_ADVICE = ("; if a state starts nonzero far below --atol and its rate is a "
                      "difference of much larger terms, try --no-scaled-atol")
#: what to try for a member stopped by a limit (the CLI's option names)
LIMIT_ADVICE = {
    "max_steps": "raise --max-steps, use --method rodas4 if the model is stiff, or narrow "
                 "the parameter bounds that lead here" + SCALED_ATOL_ADVICE,
    "max_steps_per_interval": "raise --max-steps-per-interval (0: no limit), add output "
                              "times, use --method rodas4 if the model is stiff, or narrow "
                              "the parameter bounds that lead here" + SCALED_ATOL_ADVICE,
    "time_limit": "raise --member-time-limit (0: no limit), use --method rodas4 if it was "
                  "not chosen, loosen --rtol/--atol, or narrow the parameter bounds that "
                  "lead here",
}
LIMIT_WHAT = {
    "max_steps": "took --max-steps steps",
    "max_steps_per_interval": "took --max-steps-per-interval steps in one output interval",
    "time_limit": "ran past --member-time-limit and was stopped (the rest of the ensemble "
                  "finished)",
}


def _stopped(name: str, times: np.ndarray, rows: np.ndarray | None) -> str:
    """A member stopped by a limit: where (from its time courses: the first output time
    it did not reach) and what to try."""
    where = ""
    if rows is not None and rows.size:
        reached = ~np.all(np.isnan(rows.reshape(len(rows), -1)), axis=1)
        k = int(np.argmin(reached)) if not reached.all() else len(times)
        if 0 < k < len(times):
            where = f" (stopped between t = {times[k - 1]:g} and t = {times[k]:g})"
        elif k == 0:
            where = " (stopped before the first output time)"
    return f"the integration {LIMIT_WHAT[name]}{where}: {LIMIT_ADVICE[name]}"


def messages(status: np.ndarray, times: np.ndarray, data: np.ndarray | None, *,
             draws: bool = False, delays: bool = False, fast: bool = False,
             reference: bool = False) -> dict[int, str]:
    """{member: message} for the first MAX_MESSAGES failed members; `data` (members,
    times, outputs) when full time courses were kept, else None; `draws`: the model
    has distrib draws, whose invalid arguments also fail a member; `delays`: it has
    delay(), whose history ring may run short; `fast`: it has fast reactions, whose
    relaxation may find no equilibrium; `reference`: the members ran through the CPU
    reference (the numpy engine's path for implicit methods and events), whose
    `failed` is its own integrator's or event loop's."""
    out = {}
    # np.flatnonzero's steps as methods (its wrappers cost more than the test)
    for i in (np.asarray(status) != int(Status.ok)).ravel().nonzero()[0][:MAX_MESSAGES]:
        code = int(status[i])
        if code == Status.failed and reference:
            out[int(i)] = REFERENCE_FAILED
        elif code == Status.failed:
            out[int(i)] = ((DRAW_FAILED + "; or " + EVENTS_FAILED) if draws else EVENTS_FAILED) \
                + (HISTORY_LOST if delays else "") + (NO_FAST_EQUILIBRIUM if fast else "")
        elif code == Status.non_finite:
            out[int(i)] = _non_finite(times, None if data is None else np.asarray(data[i]))
        elif Status(code).name in LIMIT_ADVICE:
            out[int(i)] = _stopped(Status(code).name, times,
                                   None if data is None else np.asarray(data[i]))
    return out
