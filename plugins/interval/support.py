"""What the `interval` backend refuses, with the ids of the elements that use it.

- Whatever the ODE view cannot represent, and delay() (unsupported_without_history).
- Events: an enclosure through a discontinuity needs the crossing time enclosed
  too (not done); the model is refused by event id.
- Right-hand sides with a construct that has no Taylor expansion (piecewise,
  min/max, abs, floor, conditions, functions the generator does not expand):
  refused by the state whose rate uses it.
"""

from __future__ import annotations

from sbmlgpu.codegen.taylor import Dag, TaylorError
from sbmlgpu.features import network_features
from sbmlgpu.ir import Network, TIME
from sbmlgpu.views import ode as ode_view


def unsupported(network: Network) -> list[tuple[str, tuple[str, ...]]]:
    missing = ode_view.unsupported_without_history(network,
                                                   "enclosures keep no trajectory history")
    if missing:
        return missing
    out = []
    drawn = network_features(network).get("distrib draws")
    if drawn:
        out.append(("distrib draw (an enclosure needs a set of initial values, not a "
                    "random one)", drawn))
    if network.events:
        out.append(("event (enclosures through discontinuities are not computed)",
                    tuple(e.id or f"event_{i + 1}" for i, e in enumerate(network.events))))
    ode = ode_view.ode_system(network)
    rough: dict[str, list[str]] = {}
    dag = Dag({x: "x" for x in ode.x}, {p: "c" for p in ode.p}, TIME)
    for sbml_id, f in zip(ode.state_ids, ode.rhs):
        try:
            dag.build(f)
        except TaylorError as e:
            rough.setdefault(f"{e.construct} in a rate (no Taylor expansion: enclosures "
                             f"need smooth right-hand sides)", []).append(sbml_id)
    out += [(feature, tuple(ids)) for feature, ids in rough.items()]
    return out
