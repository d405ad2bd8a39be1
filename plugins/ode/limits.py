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


def metadata(options: OdeOptions, status: np.ndarray, steps: np.ndarray, second) -> dict:
    """The run's limits and the members that reached them; `second`: the two-pass
    report (sbmlgpu.plugins.ode.passes.PassReport)."""
    status = np.asarray(status)
    members = {}
    for name in LIMIT_STATUSES:
        hit = np.flatnonzero(status == int(Status.__members__[name]))
        if hit.size:
            members[name] = {"count": int(hit.size),
                             "members": [int(i) for i in hit[:MAX_LISTED]]}
    return {
        "limits": {"max_steps": options.max_steps,
                   "max_steps_per_interval": options.max_steps_per_interval,
                   "member_time_limit_s": options.member_time_limit,
                   "pass_steps": second.pass_steps},
        "limit_members": members,
        "steps_max_member": int(np.argmax(steps)) if steps.size else None,
        "second_pass_members": int(len(second.rerun)),
        "second_pass_seconds": second.seconds,
    }
