"""What a time course reports: output names, as the caller asks for them.

An output name is an SBML id, optionally wrapped in a selector that says which
quantity of a species to report (the spelling follows libRoadRunner's `[S1]`):

    S1                 the SBML value of the id: for a species, its concentration,
                       or its amount if it has only substance units or lives in a
                       compartment of spatialDimensions 0
    [S1]               a species' concentration   (long form: concentration(S1))
    amount(S1)         a species' amount
    value(S1)          the same as S1: the spelling result tables use for an id
                       that is also the name of one of their own columns
                       (`time`, `member`; see table_column)

Compartments, parameters, species references and reactions have one value each
(size, value, stoichiometry, rate); the selectors are for species only. A
species in a compartment of spatialDimensions 0 has an amount and no
concentration (SBML leaves the size of such a compartment, and so the
concentration, undefined): its value and `amount(S)` are that amount, and `[S]`
is refused. Result columns keep the names as asked (`[S1]`, `amount(S1)`).

`check_outputs` validates names once, at the edge (API and CLI), with an
OptionError naming the bad one; backends turn a name into an expression with
`expression(view, name)`, which asks the view (core/views) for it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from .errors import OptionError

if TYPE_CHECKING:  # pragma: no cover - the IR imports sympy: only for annotations
    from .ir import Network

VALUE, AMOUNT, CONCENTRATION = "value", "amount", "concentration"
KINDS = (VALUE, AMOUNT, CONCENTRATION)
OPTION = "outputs"

# SBML ids are letters, digits and underscores, not starting with a digit, so
# none of these spellings can be an id itself.
_ID = r"[A-Za-z_][A-Za-z0-9_]*"
_FORMS = (
    (re.compile(rf"\[({_ID})\]"), CONCENTRATION),
    (re.compile(rf"concentration\(({_ID})\)"), CONCENTRATION),
    (re.compile(rf"amount\(({_ID})\)"), AMOUNT),
    (re.compile(rf"value\(({_ID})\)"), VALUE),
    (re.compile(rf"({_ID})"), VALUE),
)
SPELLINGS = "ID, [ID], concentration(ID), amount(ID) or value(ID)"


@dataclass(frozen=True)
class Output:
    """One output: `name` as asked (the result column), the SBML `id`, the `kind`."""

    name: str
    id: str
    kind: str = VALUE


def output_name(sbml_id: str, kind: str = VALUE) -> str:
    """The canonical name of (id, kind): `S1`, `[S1]` or `amount(S1)`."""
    if kind == VALUE:
        return sbml_id
    if kind == CONCENTRATION:
        return f"[{sbml_id}]"
    if kind == AMOUNT:
        return f"amount({sbml_id})"
    raise ValueError(f"unknown output kind {kind!r}; one of {KINDS}")


def table_column(name: str, reserved: Sequence[str]) -> str:
    """The column header of output `name` in a table whose own columns are
    `reserved` (e.g. `time`, `member`): an SBML id may be `time` (the csymbol has
    no id), so such a column is written `value(time)`, which names the same output
    and cannot be mistaken for the table's own column."""
    return f"value({name})" if name in reserved else name


def parse_output(name: str) -> Output:
    """The Output that `name` spells; OptionError if it spells none."""
    if not isinstance(name, str):
        raise OptionError(OPTION, f"{name!r} is not an output name ({SPELLINGS})")
    for pattern, kind in _FORMS:
        m = pattern.fullmatch(name)
        if m:
            return Output(name, m.group(1), kind)
    raise OptionError(OPTION, f"{name!r} is not an output name: write {SPELLINGS}, "
                              f"with ID an SBML id")


def check_output(network: Network, output: Output) -> None:
    """OptionError unless `output` names something `network` can report."""
    kind = network.kind_of(output.id)
    if kind is None:
        from .ensemble import unknown_id_error

        known = [*network.species_by_id, *network.parameter_by_id,
                 *network.compartment_by_id, *network.species_reference_by_id,
                 *network.reaction_by_id]
        raise unknown_id_error(OPTION, output.id, known, "an id") from None
    if output.kind == VALUE:
        return
    if kind != "species":
        raise OptionError(OPTION, f"{output.name!r}: {output.id!r} is a "
                                  f"{kind.replace('_', ' ')}, and {output.kind} is asked "
                                  f"of species only; ask for {output.id!r} (its value)")
    if output.kind == CONCENTRATION and zero_dimensional(network, output.id):
        compartment = network.species_by_id[output.id].compartment
        raise OptionError(OPTION, f"{output.name!r}: species {output.id!r} is in compartment "
                                  f"{compartment!r} of spatialDimensions 0, where SBML "
                                  f"defines no concentration; ask for "
                                  f"{output_name(output.id, AMOUNT)!r} (or {output.id!r}, "
                                  f"the same amount)")


def zero_dimensional(network: Network, species_id: str) -> bool:
    """True for a species in a compartment of spatialDimensions 0."""
    compartment = network.compartment_by_id.get(network.species_by_id[species_id].compartment)
    return compartment is not None and compartment.spatial_dimensions == 0


def check_outputs(network: Network, names: Sequence[str]) -> tuple[Output, ...]:
    """Every name parsed and checked against `network`; OptionError naming the first
    bad one (with the closest ids when the id is unknown)."""
    if isinstance(names, str):
        names = [names]
    outputs = tuple(parse_output(n) for n in names)
    for o in outputs:
        check_output(network, o)
    return outputs


def default_outputs(network: Network) -> tuple[str, ...]:
    """Every species (its SBML value), then the parameters and compartments that
    change over time (rate rules, assignment rules, events): what every backend
    reports when no outputs are asked for. Kept on the network (it is immutable):
    a run asks twice."""
    from .views.cache import memoised  # the network's module (sympy) is loaded already

    return memoised(network, ("default outputs",), lambda: _default_outputs(network))


def _default_outputs(network: Network) -> tuple[str, ...]:
    changing = ({r.variable for r in network.rate_rules}
                | {r.variable for r in network.assignment_rules}
                | set(network.event_assigned))
    others = [x.id for x in (*network.parameters, *network.compartments) if x.id in changing]
    return tuple(s.id for s in network.species) + tuple(others)


def expression(view, name: str | Output):
    """The expression (in the view's x, p, t) of output `name`; `view` is an
    OdeSystem or a StochasticSystem (anything with `network` and `output(id, kind)`)."""
    output = name if isinstance(name, Output) else parse_output(name)
    check_output(view.network, output)
    return view.output(output.id, output.kind)


def evaluate(trajectory, names: Sequence[str]):
    """(times, names) array of output names evaluated on a CPU-reference trajectory
    (`sbmlgpu.reference.Trajectory`: `evaluate(ids, kind)`), one call per kind."""
    import numpy as np

    parsed = [parse_output(name) for name in names]
    values = np.full((len(trajectory.times), len(parsed)), np.nan)
    for kind in dict.fromkeys(o.kind for o in parsed):
        columns = [j for j, o in enumerate(parsed) if o.kind == kind]
        values[:, columns] = trajectory.evaluate([parsed[j].id for j in columns], kind)
    return values
