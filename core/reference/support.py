"""What the CPU reference cannot simulate, for the `reference` backend's supports()."""

from __future__ import annotations

from ..features import CONTINUOUS_DRAW, draws_evaluated_continuously, network_features
from ..ir import Network
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


def draws_outside_instants(network: Network) -> list[tuple[str, tuple[str, ...]]]:
    """features.draws_evaluated_continuously, as a refusal of the reference; and draws
    in a model with delay(), whose history before the start is the initial values
    evaluated again at every look-up (a drawn initial value would differ each time)."""
    drawn = draws_evaluated_continuously(network)
    if drawn:
        return [(CONTINUOUS_DRAW, drawn)]
    present = network_features(network)
    if "delay()" in present and "distrib draws" in present:
        return [("distrib draw in a model with delay() (the history before the start "
                 "re-evaluates the initial values)", present["distrib draws"])]
    return []
