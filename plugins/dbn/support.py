"""What the `dbn` backend refuses, with the ids of the elements that use it.

- Whatever the ODE view cannot represent (algebraic rules, fast reactions,
  reactions without rate math): the trajectories are ODE solutions.
- delay(): a thread keeps no trajectory history.
- A model without states (no species, no rate rule): a DBN would have no variable.
Events are supported (the trajectories are integrated by the same RK4 driver as the
ode backend's, events included); a DBN's parents come from the rate equations only,
so a jump an event makes appears in the CPTs as the variable's transition from its
own previous bin (docs/dbn.md).
"""

from __future__ import annotations

from sbmlgpu.features import network_features
from sbmlgpu.ir import Network
from sbmlgpu.views import ode as ode_view


def unsupported(network: Network) -> list[tuple[str, tuple[str, ...]]]:
    drawn = network_features(network).get("distrib draws")
    if drawn:
        return [("distrib draw (not implemented in the dbn backend's kernels)", drawn)]
    missing = ode_view.unsupported_without_history(network, "a trajectory's history is not kept")
    if missing:
        return missing
    # a DBN's variables are the ODE view's states: a model without any has nothing to
    # bin (the discretisation stopped with numpy's "need at least one array to stack")
    if not ode_view.ode_system(network).n_states:
        return [("no variable that changes in time (a DBN's variables are the model's "
                 "species and rate-rule targets)", ())]
    return []
