"""What the CPU reference cannot simulate, for the `reference` backend's supports()."""

from __future__ import annotations

from ..features import draws_in_continuous_math
from ..ir import Network
from ..sbml.distrib import has_draw
from ..views import ode as ode_view
from .fast import with_fast_factor


def unsupported(network: Network) -> list[tuple[str, tuple[str, ...]]]:
    """(feature, element ids) for each thing in `network` the reference refuses;
    empty when it can simulate the model. Everything the ODE view represents is
    simulated, delay() and fast reactions included, so this is the view's own
    list (fast reactions aside), plus whatever
    the view finds only while it builds the system (e.g. an event assignment to
    a variable with an assignment rule, a circular definition)."""
    network = with_fast_factor(network)  # fast reactions: the reference handles them
    missing = ode_view.unsupported_when_built(network)
    return missing or draws_outside_instants(network)


#: why a draw in continuously evaluated math is refused (ode backend too)
CONTINUOUS_DRAW = ("distrib draw in a rate, rule, trigger, delay or priority (a new random "
                   "number at every evaluation has no meaning for an integrator; draw in an "
                   "initial assignment or an event assignment)")


def draws_outside_instants(network: Network) -> list[tuple[str, tuple[str, ...]]]:
    """The distrib draws that an ODE integration would evaluate continuously: in the
    math itself (features.draws_in_continuous_math), or brought into the rates,
    rules or triggers by the ODE view (an initial assignment of a constant
    parameter it substitutes there). Draws in initial values and event assignments
    are evaluated at one instant, and supported."""
    drawn = draws_in_continuous_math(network)
    if not drawn:
        ode = ode_view.ode_system(network)
        drawn = tuple(dict.fromkeys(
            [sid for sid, f in zip(ode.state_ids, ode.rhs) if has_draw(f)]
            + [sid for sid, e in ode.values.items() if has_draw(e)]
            + [e.id for e in ode.events if has_draw(e.trigger) or has_draw(e.priority)
               or has_draw(e.delay)]))
    return [(CONTINUOUS_DRAW, drawn)] if drawn else []
