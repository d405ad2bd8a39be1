"""A DbnResult's network as pgmpy models and XMLBIF, one transition at a time.

The network of one transition s is a two-slice network: a node per variable at slice s
(a root whose prior is the counted marginal there, independent of the others, as the
factored frontier assumes) and at slice s+1 (its CPT from the transition's counts,
given its parents at slice s). pgmpy is imported only here, and only when an export
is asked for (`pip install sbmlgpu[dbn]`).

pgmpy needs a distribution for every parent configuration. Configurations no
trajectory visited have none, so the export fills them UNIFORM (1/K per bin) and says
so: each slice-(s+1) node carries the attribute `unvisited_configurations`, the
columns of its table that were filled (parent configurations numbered as the table's
columns and `DbnResult.cpt()`'s rows: first parent most significant), space-separated,
or "none"; XMLBIF writes it as the variable's PROPERTY. Only the export is filled:
the result itself never is.

Variables stored sparse (too many parents for a dense table) are exported when their
full table has at most FULL_TABLE_LIMIT entries (K**parents * K; 10**6, e.g. 7 parents
with K = 5); above it the export of that transition is refused, naming them.

Node names: `(id, 0)` and `(id, 1)` in the DynamicBayesianNetwork (pgmpy's own
convention), `id@s` and `id@s+1` (the slice numbers themselves, e.g. `x@3`, `x@4`)
in the DiscreteBayesianNetwork and XMLBIF: no SBML id contains `@`, so these names
never clash with one another. Bins are the states `b0` .. `b{K-1}` (XMLBIF state
names must start with a letter).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import OptionError, UnsupportedModelError
from .dbn import FULL_TABLE_LIMIT, SparseCounts

if TYPE_CHECKING:  # pragma: no cover
    from .dbn import DbnResult

#: the attribute of slice-(s+1) nodes (and XMLBIF PROPERTY) listing the filled columns
UNVISITED = "unvisited_configurations"


def _pgmpy():
    """pgmpy's models and TabularCPD, or a typed error saying how to install it."""
    try:
        from pgmpy.factors.discrete import TabularCPD
        from pgmpy.models import DiscreteBayesianNetwork, DynamicBayesianNetwork
    except ImportError as exc:
        raise OptionError("export", f"the pgmpy export needs pgmpy, which does not import "
                                    f"({exc}): pip install 'sbmlgpu[dbn]'") from None
    return TabularCPD, DiscreteBayesianNetwork, DynamicBayesianNetwork


def node_name(variable: str, slice_: int) -> str:
    """The name of a variable's node at a slice in the DiscreteBayesianNetwork/XMLBIF."""
    return f"{variable}@{slice_}"


def states(bins: int) -> list[str]:
    return [f"b{b}" for b in range(bins)]


def _check(result: "DbnResult", transition: int) -> None:
    if not (isinstance(transition, (int, np.integer)) and 0 <= transition < result.slices):
        raise OptionError("transition", f"{transition!r} is not a transition of this result "
                                        f"(0 .. {result.slices - 1})")
    too_big = {}
    for var in result.variables:
        counts = result.counts[var]
        if isinstance(counts, SparseCounts) and counts.full_table_entries > FULL_TABLE_LIMIT:
            n = counts.n_parents
            too_big[f"a CPT of {result.bins}**{n} parent configurations ({var}: {n} parents; "
                    f"at most {FULL_TABLE_LIMIT} entries are exported)"] = (var,)
    if too_big:
        raise UnsupportedModelError(too_big, who=f"the pgmpy export of transition {transition}")
    empty = [var for v, var in enumerate(result.variables)
             if not result.counted[transition, v].sum() > 0]
    if empty:
        raise OptionError("transition", f"slice {transition} has no counted marginal of "
                                        f"{', '.join(empty)}: no prior to start from")


def _tables(result: "DbnResult", transition: int):
    """Per variable: (prior at slice s, CPT (K**n, K) with unvisited rows uniform, the
    indices of those rows)."""
    _check(result, transition)
    for v, var in enumerate(result.variables):
        prior = result.counted[transition, v]
        cpt = result.cpt(var, transition)
        filled = np.flatnonzero(np.isnan(cpt[:, 0]))
        cpt[filled] = 1.0 / result.bins
        yield var, prior / prior.sum(), cpt, filled


def _filled_text(filled: np.ndarray) -> str:
    return " ".join(str(i) for i in filled.tolist()) if filled.size else "none"


def to_bayesian_network(result: "DbnResult", transition: int):
    """pgmpy DiscreteBayesianNetwork of one transition: nodes `id@s` (priors: the
    counted marginals) and `id@s+1` (CPTs from the counts; attribute
    `unvisited_configurations` lists the columns filled uniform)."""
    _, DiscreteBayesianNetwork, _ = _pgmpy()
    network = DiscreteBayesianNetwork()
    network.name = f"{result.metadata.get('model', 'dbn')} transition {transition}"
    for slot in (0, 1):
        network.add_nodes_from(node_name(v, transition + slot) for v in result.variables)
    return _fill(network, result, transition, lambda v, slot: node_name(v, transition + slot))


def to_pgmpy(result: "DbnResult", transition: int):
    """pgmpy DynamicBayesianNetwork (a 2-TBN) of one transition: nodes (id, 0) with the
    counted marginals at slice s as priors, (id, 1) with the CPTs; edges (parent, 0) ->
    (id, 1); attribute `unvisited_configurations` on the (id, 1) nodes."""
    _, _, DynamicBayesianNetwork = _pgmpy()
    network = DynamicBayesianNetwork()
    network.add_nodes_from(result.variables)  # (id, 0); the edges add (id, 1)
    return _fill(network, result, transition, lambda v, slot: (v, slot))


def _fill(network, result: "DbnResult", transition: int, name):
    """Edges, priors and CPTs of one transition into a pgmpy network whose node of
    variable v at slice s + slot is name(v, slot)."""
    TabularCPD, _, _ = _pgmpy()
    k = result.bins
    tables = list(_tables(result, transition))  # checks before the network is touched
    network.add_edges_from((name(p, 0), name(v, 1)) for v in result.variables
                           for p in result.parents[v])
    for var, prior, cpt, filled in tables:
        now, after = name(var, 0), name(var, 1)
        given = [name(p, 0) for p in result.parents[var]]
        network.add_cpds(
            TabularCPD(now, k, prior.reshape(k, 1), state_names={now: states(k)}),
            # pgmpy's columns: evidence configurations, first evidence most significant
            TabularCPD(after, k, cpt.T, evidence=given, evidence_card=[k] * len(given),
                       state_names={n: states(k) for n in [after, *given]}))
        network.nodes[after][UNVISITED] = _filled_text(filled)
    return network


def write_xmlbif(result: "DbnResult", path: str | Path, transition: int) -> list[Path]:
    """XMLBIF 0.3 of `to_bayesian_network(result, transition)` (pgmpy's XMLBIFWriter);
    each slice-(s+1) variable's PROPERTY is `unvisited_configurations = ...`."""
    network = to_bayesian_network(result, transition)
    from pgmpy.readwrite import XMLBIFWriter

    path = Path(path)
    XMLBIFWriter(network).write(str(path))
    return [path]
