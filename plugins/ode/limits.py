"""The limits that stop slow members (sbmlgpu.ode's templates/limits.cuh): from the
options to a launch's settings, and from a run's statuses to its metadata.

A member stops at --max-steps (status max_steps), at --max-steps-per-interval steps
between two output times (max_steps_per_interval; dopri5 and rodas4 only, as rk4's
steps per interval are fixed by --dt) or past --member-time-limit seconds of wall
time (time_limit). The metadata say which members stopped at which limit, so that a
benchmark can say that the slowest member was bounded by them.
"""

from __future__ import annotations

import numpy as np

from sbmlgpu.results import Status

from .options import OdeOptions

#: the statuses of members stopped by a limit (not by a failure of the integration)
LIMIT_STATUSES = ("max_steps", "max_steps_per_interval", "time_limit")
#: member ids listed per limit in the metadata (the status array has them all)
MAX_LISTED = 100


def launch_limits(options: OdeOptions, method: str) -> dict[str, int]:
    """LaunchConfig's limit fields for `options` (0: none)."""
    seconds = options.member_time_limit
    return {
        "max_interval_steps": 0 if method == "rk4" else int(options.max_steps_per_interval),
        # at least 1 ns, so that a tiny limit is still a limit; at most what an int64
        # holds (292 years)
        "time_limit_ns": min(max(1, int(round(seconds * 1e9))), 2**63 - 1)
        if seconds > 0 else 0,
    }


def bound_hint(options: OdeOptions) -> str:
    """What the note of a long pass (passes.LongPassNote) says bounds its members."""
    if options.member_time_limit > 0:
        return (f"each stops after --member-time-limit {options.member_time_limit:g} s "
                f"(status time_limit)")
    return ("--member-time-limit SECONDS stops each member after that much wall time "
            "(status time_limit; off by default, as which members it stops depends on "
            "the machine and its load)")


def metadata(options: OdeOptions, status: np.ndarray, steps: np.ndarray, second,
             slowest: int | None = None) -> dict:
    """The run's limits and the members that reached them; `second`: the passes'
    report (sbmlgpu.plugins.ode.passes.PassReport); `slowest`: the member of most
    steps where the caller has it."""
    if slowest is None and steps.size:
        slowest = int(steps.argmax())
    return {
        "limits": {"max_steps": options.max_steps,
                   "max_steps_per_interval": options.max_steps_per_interval,
                   "member_time_limit_s": options.member_time_limit,
                   "pass_steps": second.pass_steps},
        "limit_members": _limit_members(np.asarray(status).ravel()),
        "steps_max_member": slowest,
        "slowest_member": _slowest(slowest, steps, second),
        "first_pass_seconds": second.first_seconds,
        "second_pass_members": int(len(second.rerun)),
        # what host_pass's rule weighs: the GPU takes the longest member's time, the
        # host about the members' total over its cores
        "second_pass_steps": _step_totals(steps, second.rerun),
        "second_pass_seconds": second.seconds,
        "second_pass_where": second.where or None,
        "second_pass_threads": second.threads or None,
        # under --method auto, the method the second pass ran its members with where
        # it is not the first pass's, and those it did not finish, run again with the
        # first (passes.later_method)
        "second_pass_method": second.method or None,
        "second_pass_fallback": {"count": int(len(second.fallback)),
                                 "members": [int(i) for i in second.fallback[:MAX_LISTED]]}
        if len(second.fallback) else None,
        # the passes after the first, in order: a middle pass on the device, then the
        # last with the full budget ({max_steps, members, where, seconds} each; under
        # --method auto also `method`, and the first method's retries of the later
        # method's failures, a stage of its own: `overlaps` names the stage whose
        # threads ran them, whose seconds then include theirs)
        "later_passes": list(second.stages),
    }


def _limit_members(status: np.ndarray) -> dict:
    """{limit: {"count", "members"}} for each limit some member reached."""
    members: dict = {}
    if not np.count_nonzero(status != int(Status.ok)):  # the usual run: one look, not one a limit
        return members
    for name in LIMIT_STATUSES:
        hit = (status == int(Status.__members__[name])).nonzero()[0]
        if hit.size:
            members[name] = {"count": int(hit.size),
                             "members": [int(i) for i in hit[:MAX_LISTED]]}
    return members


def _step_totals(steps: np.ndarray, members: np.ndarray) -> dict | None:
    if not len(members) or not steps.size:
        return None
    taken = steps[members].astype(np.int64)
    return {"max": int(taken.max()), "mean": float(taken.mean()), "sum": int(taken.sum())}


def _slowest(member: int | None, steps: np.ndarray, second) -> dict | None:
    """The member of most steps: its steps and wall seconds, which are its own where it
    ran on a host thread of the second pass, else its launch's (an upper bound: a GPU
    thread lasts at most its launch; None where the launch ran on another MPI rank)."""
    if member is None:
        return None
    seconds = second.member_seconds[member] if member < len(second.member_seconds) \
        else float("nan")
    own = _holds(second.measured, member)
    return {"member": member, "steps": int(steps[member]),
            "seconds": float(seconds) if seconds == seconds else None,
            "seconds_are": "its own, on a host thread" if own
            else "its launch's wall time (an upper bound)",
            "pass": 2 if _holds(second.rerun, member) else 1}


def _holds(members: np.ndarray, member: int) -> bool:
    """`member in members`: np.isin took ~12 us, and `in` ~3 us on an empty array (the
    usual case: no member was rerun)."""
    return bool(members.size) and member in members
