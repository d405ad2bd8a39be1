"""What the CPU reference cannot simulate, for the `reference` backend's supports()."""

from __future__ import annotations

from ..errors import UnsupportedModelError
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
    missing = list(ode_view.unsupported(network))
    if missing:
        return missing
    try:
        ode_view.ode_system(network)
    except UnsupportedModelError as exc:
        return [(feature, tuple(ids)) for feature, ids in exc.features.items()]
    return []
