"""Writes the chemical-master-equation models of sbml_models/ (cme_*.xml).

Run `python sbml_models/build_cme_models.py` to regenerate them; the files are
committed. sbml_models/cme_models.md gives the sources of every rate constant.

The CME backend reads a kinetic law as the SSA backend does: it IS the propensity in
molecules per time (species are amounts in a compartment of size 1). Mass action is
therefore written in its combinatorial form: 2X + Y -> 3X has the law
c * X * (X - 1) / 2 * Y, with c the stochastic rate constant.

Each model's notes name suggested copy-number bounds and the number of states they
give: the states reachable from the initial state by reactions whose propensity is
positive and whose result stays inside the bounds. `STATE_COUNT` holds the closed
forms of those counts; tests/test_cme_models.py checks them against a breadth-first
enumeration at small bounds and checks that the notes quote them.
"""

from __future__ import annotations

from math import prod
from pathlib import Path

from build_small_models import ModelWriter

HERE = Path(__file__).resolve().parent

# Bound sets per model: one of the size of Maggioni et al.'s Table I (3e5 - 1e7
# states), one near 1e7, one near 1e8.
BOUNDS = {
    "cme_toggle_switch": (
        {"Pa": 300, "Pb": 300},
        {"Pa": 1600, "Pb": 1600},
        {"Pa": 5000, "Pb": 5000},
    ),
    "cme_brusselator": (
        {"X": 3000, "Y": 3000},
        {"X": 10000, "Y": 10000},
    ),
    "cme_schnakenberg": (
        {"X": 600, "Y": 600},
        {"X": 3200, "Y": 3200},
        {"X": 10000, "Y": 10000},
    ),
    "cme_phage_lambda": (
        {"CI": 30, "CI2": 30, "Cro": 20, "Cro2": 15},
        {"CI": 55, "CI2": 55, "Cro": 40, "Cro2": 30},
    ),
}


def _box(bounds: dict, ids) -> int:
    return prod(bounds[i] + 1 for i in ids)


def _toggle_count(b: dict) -> int:
    # Four gene configurations, each over the (Pa, Pb) box, less the four corner
    # states with both genes bound and Pa > Na - 2 and Pb > Nb - 2: the last binding
    # took two proteins out and, with both genes bound, nothing makes more.
    return 4 * _box(b, ("Pa", "Pb")) - 4


def _lambda_count(b: dict) -> int:
    # Derived in cme_models.md ("phage lambda: state count"): 27 operator
    # configurations over the protein box, less the corners that the last binding
    # leaves unreachable (a site bound takes one dimer out of the pool).
    return lambda_state_count(b["CI"], b["CI2"], b["Cro"], b["Cro2"])


STATE_COUNT = {
    "cme_toggle_switch": _toggle_count,
    "cme_brusselator": lambda b: _box(b, ("X", "Y")),
    "cme_schnakenberg": lambda b: _box(b, ("X", "Y")),
    "cme_phage_lambda": _lambda_count,
}


def mass_levels(n_mono: int, n_dimer: int, t: int) -> int:
    """#{(x, y): 0 <= x <= n_mono, 0 <= y <= n_dimer, x + 2 y <= t}: the states of one
    protein (monomers x, dimers y) whose mass, in monomers, is at most t."""
    return sum(min(n_mono, t - 2 * y) + 1 for y in range(n_dimer + 1) if t - 2 * y >= 0)


def lambda_state_count(n_ci: int, n_ci2: int, n_cro: int, n_cro2: int) -> int:
    """States of cme_phage_lambda reachable under these bounds, every bound >= 2.

    The reasoning (cme_models.md, "phage lambda: the state count"): in an operator
    configuration where a protein can be made (CI: OR3 free; Cro: OR1 and OR2 free) its
    (monomer, dimer) box is reachable whole. Where it cannot, its mass (monomers + 2
    dimers) can only fall, and is at most the box's largest mass less 2 for every
    dimer of it bound since it was last made ("deficit"). A configuration is reached with
    a set of (CI deficit, Cro deficit) pairs; its states are the union of the products
    of the two mass-limited sets. The pairs are found by a fixed point over the 27
    configurations; the unions are counted exactly.
    """
    free, by_ci, by_cro = "F", "R", "C"

    def makes_ci(cfg):
        return cfg[2] == free

    def makes_cro(cfg):
        return cfg[0] == free and cfg[1] == free

    def settle(cfg, d_ci, d_cro):
        return (0 if makes_ci(cfg) else max(d_ci, 0), 0 if makes_cro(cfg) else max(d_cro, 0))

    start = (free,) * 3
    reached = {start: {(0, 0)}}
    todo = [(start, (0, 0))]
    while todo:
        cfg, (d_ci, d_cro) = todo.pop()
        moves = []
        for i, site in enumerate(cfg):
            if site == free:
                moves.append((i, by_ci, d_ci + 1, d_cro))
                moves.append((i, by_cro, d_ci, d_cro + 1))
            else:
                moves.append((i, free, d_ci - (site == by_ci), d_cro - (site == by_cro)))
        for i, new_site, a, b in moves:
            nxt = cfg[:i] + (new_site,) + cfg[i + 1:]
            pair = settle(nxt, a, b)
            if pair not in reached.setdefault(nxt, set()):
                reached[nxt].add(pair)
                todo.append((nxt, pair))
    m_ci, m_cro = n_ci + 2 * n_ci2, n_cro + 2 * n_cro2
    total = 0
    for pairs in reached.values():
        # A union of products of nested sets. A CI state of mass m lies in the CI sets
        # of the pairs with deficit a <= (m_ci - m) / 2; with it go the Cro states of
        # the largest of those pairs' Cro sets (smallest Cro deficit).
        for level in range(min(a for a, _ in pairs), m_ci // 2 + 1):
            best_b = min(b for a, b in pairs if a <= level)
            ci_at_level = (mass_levels(n_ci, n_ci2, m_ci - 2 * level)
                           - mass_levels(n_ci, n_ci2, m_ci - 2 * level - 2))
            total += ci_at_level * mass_levels(n_cro, n_cro2, m_cro - 2 * best_b)
    return total


def _sizes_note(model_id: str) -> str:
    parts = []
    for b in BOUNDS[model_id]:
        spec = ", ".join(f"{k}={v}" for k, v in b.items())
        parts.append(f"bounds {spec}: {STATE_COUNT[model_id](b)} states")
    return ("Suggested copy-number bounds (states reachable from the initial state inside "
            "the bounds): " + "; ".join(parts) + ".")


def _writer(model_id: str, name: str, notes: str) -> ModelWriter:
    """A ModelWriter whose notes end with the suggested bounds and their state counts."""
    return ModelWriter(model_id, name, notes + " " + _sizes_note(model_id))


def _write(w: ModelWriter) -> Path:
    return w.write(f"{w.m.getId()}.xml")


# -- 1. toggle switch ------------------------------------------------------------
def toggle_switch() -> Path:
    w = _writer(
        "cme_toggle_switch", "Genetic toggle switch, CME form (Cao and Liang 2008; BioModels BIOMD0000000483)",
        "Gardner-Cantor-Collins toggle switch in the CME form of Cao and Liang, BMC Syst. Biol. "
        "2:30 (2008), as deposited by the authors in BioModels BIOMD0000000483: genes A and B "
        "(Da, Db free; BDa, BDb bound), proteins Pa, Pb; synthesis sa Da, sb Db; degradation "
        "da Pa, db Pb; a protein dimer binds the other gene: 2 Pb + Da -> BDa (ba Pb (Pb-1)/2 Da), "
        "2 Pa + Db -> BDb (bb Pa (Pa-1)/2 Db); unbinding BDa -> Da + 2 Pb (ua), "
        "BDb -> Db + 2 Pa (ub). sa = sb = 100, da = db = 1, ba = bb = 1e-5, ua = ub = 0.1 "
        "(the deposit's values). The deposit's buffer species ESA, ESB (ACME's finite buffers) "
        "are left out: copy-number bounds take their place. Initial state (our choice; the "
        "deposit starts from all zeros): Da = Db = 1, BDa = BDb = 0, Pa = Pb = 0.")
    for pid, v in (("sa", 100.0), ("sb", 100.0), ("da", 1.0), ("db", 1.0),
                   ("ba", 1e-5), ("bb", 1e-5), ("ua", 0.1), ("ub", 0.1)):
        w.parameter(pid, v)
    for sid, v in (("Pa", 0), ("Pb", 0), ("Da", 1), ("Db", 1), ("BDa", 0), ("BDb", 0)):
        w.species(sid, v)
    w.reaction("synthesis_Pa", {}, {"Pa": 1}, "sa * Da", modifiers=("Da",))
    w.reaction("synthesis_Pb", {}, {"Pb": 1}, "sb * Db", modifiers=("Db",))
    w.reaction("degradation_Pa", {"Pa": 1}, {}, "da * Pa")
    w.reaction("degradation_Pb", {"Pb": 1}, {}, "db * Pb")
    w.reaction("Pb_dimer_binds_gene_A", {"Pb": 2, "Da": 1}, {"BDa": 1}, "ba * Pb * (Pb - 1) / 2 * Da")
    w.reaction("Pa_dimer_binds_gene_B", {"Pa": 2, "Db": 1}, {"BDb": 1}, "bb * Pa * (Pa - 1) / 2 * Db")
    w.reaction("Pb_dimer_leaves_gene_A", {"BDa": 1}, {"Da": 1, "Pb": 2}, "ua * BDa")
    w.reaction("Pa_dimer_leaves_gene_B", {"BDb": 1}, {"Db": 1, "Pa": 2}, "ub * BDb")
    return _write(w)


# -- 2. Brusselator ----------------------------------------------------------------
def brusselator() -> Path:
    w = _writer(
        "cme_brusselator", "Brusselator, stochastic (Gillespie 1977)",
        "Brusselator (Prigogine and Lefever 1968) with the stochastic rate constants of "
        "Gillespie, J. Phys. Chem. 81:2340 (1977), Brusselator example: 0 -> X (c1X1 = 5000), "
        "X -> Y (c2X2 = 50, the reservoir species folded into the constant), "
        "2 X + Y -> 3 X (c3 X (X-1)/2 Y, c3 = 5e-5), X -> 0 (c4 = 5). Initial state "
        "X = 1000, Y = 2000 (Gillespie's, the deterministic steady state). The deterministic "
        "limit cycle reaches X from about 110 to 6720 and Y from 300 to 6820, so bounds below "
        "about 8000 cut it and the boundary probability is large.")
    for pid, v in (("c1X1", 5000.0), ("c2X2", 50.0), ("c3", 5e-5), ("c4", 5.0)):
        w.parameter(pid, v)
    w.species("X", 1000)
    w.species("Y", 2000)
    w.reaction("inflow_X", {}, {"X": 1}, "c1X1")
    w.reaction("conversion_X_to_Y", {"X": 1}, {"Y": 1}, "c2X2 * X")
    w.reaction("autocatalysis", {"X": 2, "Y": 1}, {"X": 3}, "c3 * X * (X - 1) / 2 * Y")
    w.reaction("outflow_X", {"X": 1}, {}, "c4 * X")
    return _write(w)


# -- 3. Schnakenberg ----------------------------------------------------------------
def schnakenberg() -> Path:
    w = _writer(
        "cme_schnakenberg", "Schnakenberg, stochastic (constants chosen by us)",
        "Schnakenberg (J. Theor. Biol. 81:389, 1979): 0 -> X (k1), X -> 0 (k2 X), 0 -> Y (k3), "
        "2 X + Y -> 3 X (k4 X (X-1)/2 Y). No source we could read gives stochastic constants, "
        "so they are ours: the dimensionless form u' = a - u + u^2 v, v' = b - u^2 v with "
        "a = 0.1, b = 0.5 (past the Hopf bifurcation, b - a > (a + b)^3, so a limit cycle) at "
        "system size Omega = 100: k1 = a Omega = 10, k2 = 1, k3 = b Omega = 50, "
        "k4 = 2 / Omega^2 = 2e-4. Initial state X = 60, Y = 139 (the deterministic steady "
        "state (a + b) Omega, b Omega / (a + b)^2, rounded). The deterministic cycle reaches X "
        "from 18 to 297 and Y from 9 to 368.")
    for pid, v in (("k1", 10.0), ("k2", 1.0), ("k3", 50.0), ("k4", 2e-4)):
        w.parameter(pid, v)
    w.species("X", 60)
    w.species("Y", 139)
    w.reaction("inflow_X", {}, {"X": 1}, "k1")
    w.reaction("outflow_X", {"X": 1}, {}, "k2 * X")
    w.reaction("inflow_Y", {}, {"Y": 1}, "k3")
    w.reaction("autocatalysis", {"X": 2, "Y": 1}, {"X": 3}, "k4 * X * (X - 1) / 2 * Y")
    return _write(w)


# -- 4. phage lambda ----------------------------------------------------------------
LAMBDA_PARAMETERS = (  # MODEL1308080003 (Cao, Lu, Liang 2010), values as deposited, per second
    ("kb_DimerDNA", 0.021), ("ku_CI2OR1", 0.03998), ("ku_CI2OR1c1", 0.0005),
    ("ku_CI2OR1c2", 0.05531), ("ku_CI2OR2", 1.026), ("ku_CI2OR2c1", 0.01284),
    ("ku_CI2OR2c2", 0.00928), ("ku_CI2OR2c3", 0.01284), ("ku_CI2OR3", 5.19753),
    ("ku_CI2OR3c1", 0.04702), ("ku_CI2OR3c2", 5.19753), ("ku_Cro2OR1", 0.08999),
    ("ku_Cro2OR1c1", 0.01776), ("ku_Cro2OR1c2", 0.05531), ("ku_Cro2OR2", 0.6306),
    ("ku_Cro2OR2c1", 0.12448), ("ku_Cro2OR2c2", 0.23822), ("ku_Cro2OR2c3", 0.14641),
    ("ku_Cro2OR3", 0.00928), ("ku_Cro2OR3c1", 0.00351), ("ku_Cro2OR3c2", 0.01092),
    ("kb_DimerCI", 0.05), ("kb_DimerCro", 0.0307), ("ku_Dimer", 0.5),
    ("kd_CI", 0.0007), ("kd_Cro", 0.0025), ("ks_CI", 0.0069), ("ks_CIcoop", 0.066),
    ("ks_Cro", 0.0929),
)

# (bound site, rate constant, the neighbouring-site states in which it applies), in the
# deposit's order UnbindReaction1..38. A bound site is R (CI2) or C (Cro2) + OR1..3.
LAMBDA_UNBINDING = (
    ("ROR1", "ku_CI2OR1", ("OR2",)), ("ROR1", "ku_CI2OR1c1", ("ROR2", "OR3")),
    ("ROR1", "ku_CI2OR1c2", ("ROR2", "ROR3")), ("ROR1", "ku_CI2OR1c1", ("ROR2", "COR3")),
    ("ROR1", "ku_CI2OR1", ("COR2",)),
    ("ROR2", "ku_CI2OR2", ("OR1", "OR3")), ("ROR2", "ku_CI2OR2c1", ("ROR1", "OR3")),
    ("ROR2", "ku_CI2OR2c2", ("OR1", "ROR3")), ("ROR2", "ku_CI2OR2c3", ("ROR1", "ROR3")),
    ("ROR2", "ku_CI2OR2", ("COR1", "OR3")), ("ROR2", "ku_CI2OR2", ("OR1", "COR3")),
    ("ROR2", "ku_CI2OR2", ("COR1", "COR3")), ("ROR2", "ku_CI2OR2c1", ("ROR1", "COR3")),
    ("ROR2", "ku_CI2OR2c2", ("COR1", "ROR3")),
    ("ROR3", "ku_CI2OR3", ("OR2",)), ("ROR3", "ku_CI2OR3c1", ("ROR2", "OR1")),
    ("ROR3", "ku_CI2OR3c2", ("ROR2", "ROR1")), ("ROR3", "ku_CI2OR3c1", ("ROR2", "COR1")),
    ("ROR3", "ku_CI2OR3", ("COR2",)),
    ("COR1", "ku_Cro2OR1", ("OR2",)), ("COR1", "ku_Cro2OR1", ("ROR2",)),
    ("COR1", "ku_Cro2OR1c1", ("COR2", "OR3")), ("COR1", "ku_Cro2OR1c1", ("COR2", "ROR3")),
    ("COR1", "ku_Cro2OR1c2", ("COR2", "COR3")),
    ("COR2", "ku_Cro2OR2", ("OR1", "OR3")), ("COR2", "ku_Cro2OR2", ("ROR1", "OR3")),
    ("COR2", "ku_Cro2OR2", ("OR1", "ROR3")), ("COR2", "ku_Cro2OR2", ("ROR1", "ROR3")),
    ("COR2", "ku_Cro2OR2c1", ("COR1", "OR3")), ("COR2", "ku_Cro2OR2c2", ("OR1", "COR3")),
    ("COR2", "ku_Cro2OR2c3", ("COR1", "COR3")), ("COR2", "ku_Cro2OR2c2", ("ROR1", "COR3")),
    ("COR2", "ku_Cro2OR2c1", ("COR1", "ROR3")),
    ("COR3", "ku_Cro2OR3", ("OR2",)), ("COR3", "ku_Cro2OR3", ("ROR2",)),
    ("COR3", "ku_Cro2OR3c1", ("COR2", "OR1")), ("COR3", "ku_Cro2OR3c1", ("COR2", "ROR1")),
    ("COR3", "ku_Cro2OR3c2", ("COR2", "COR1")),
)


def phage_lambda() -> Path:
    w = _writer(
        "cme_phage_lambda", "Phage lambda switch, CME form (Cao, Lu, Liang 2010; BioModels MODEL1308080003)",
        "Phage lambda epigenetic switch of Cao, Lu and Liang, PNAS 107:18445 (2010), as "
        "deposited by the authors in BioModels MODEL1308080003 (constants from Zhu et al. 2006 "
        "and Arkin et al. 1998, per second). Operator sites OR1, OR2, OR3 are each free (ORi), "
        "bound by a CI dimer (RORi) or by a Cro dimer (CORi). CI is made when OR3 is free and "
        "OR2 free (ks_CI) or Cro-bound (ks_CI) or CI-bound (ks_CIcoop); Cro when OR1 and OR2 "
        "are free (ks_Cro); monomers degrade (kd_CI, kd_Cro) and dimerise (kb_DimerCI X (X-1)/2, "
        "kb_DimerCro, dissociation ku_Dimer); a dimer binds a free site (kb_DimerDNA) and leaves "
        "it with a rate that depends on the neighbouring sites (the 38 unbinding reactions of "
        "the deposit, ids kept). The deposit lists the neighbour states of a reaction as "
        "modifiers, which ACME reads as the condition for the reaction to fire; here the law "
        "multiplies by those 0/1 site species, so the propensity is zero elsewhere. The "
        "deposit's buffer species EmptySet is left out (bounds take its place) and its two "
        "reversible dimerisations are split into forward and reverse reactions. Initial state "
        "(the deposit's): OR1 = OR2 = OR3 = 1, every other species 0.")
    for pid, v in LAMBDA_PARAMETERS:
        w.parameter(pid, v)
    for sid in ("OR1", "OR2", "OR3"):
        w.species(sid, 1)
    for sid in ("CI", "Cro", "CI2", "Cro2", "ROR1", "ROR2", "ROR3", "COR1", "COR2", "COR3"):
        w.species(sid, 0)
    w.reaction("SynReaction1", {}, {"CI": 1}, "ks_CI * OR3 * OR2", modifiers=("OR3", "OR2"))
    w.reaction("SynReaction2", {}, {"CI": 1}, "ks_CI * OR3 * COR2", modifiers=("OR3", "COR2"))
    w.reaction("SynReaction3", {}, {"CI": 1}, "ks_CIcoop * OR3 * ROR2", modifiers=("OR3", "ROR2"))
    w.reaction("SynReaction4", {}, {"Cro": 1}, "ks_Cro * OR1 * OR2", modifiers=("OR1", "OR2"))
    w.reaction("DegReaction1", {"CI": 1}, {}, "kd_CI * CI")
    w.reaction("DegReaction2", {"Cro": 1}, {}, "kd_Cro * Cro")
    w.reaction("DimReaction1_forward", {"CI": 2}, {"CI2": 1}, "kb_DimerCI * CI * (CI - 1) / 2")
    w.reaction("DimReaction1_reverse", {"CI2": 1}, {"CI": 2}, "ku_Dimer * CI2")
    w.reaction("DimReaction2_forward", {"Cro": 2}, {"Cro2": 1}, "kb_DimerCro * Cro * (Cro - 1) / 2")
    w.reaction("DimReaction2_reverse", {"Cro2": 1}, {"Cro": 2}, "ku_Dimer * Cro2")
    binding = (("OR1", "CI2", "ROR1"), ("OR2", "CI2", "ROR2"), ("OR3", "CI2", "ROR3"),
               ("OR1", "Cro2", "COR1"), ("OR2", "Cro2", "COR2"), ("OR3", "Cro2", "COR3"))
    for n, (site, dimer, bound) in enumerate(binding, start=1):
        w.reaction(f"BindReaction{n}", {site: 1, dimer: 1}, {bound: 1},
                   f"kb_DimerDNA * {site} * {dimer}")
    for n, (bound, k, context) in enumerate(LAMBDA_UNBINDING, start=1):
        site, dimer = bound[1:], ("CI2" if bound[0] == "R" else "Cro2")
        w.reaction(f"UnbindReaction{n}", {bound: 1}, {site: 1, dimer: 1},
                   " * ".join((k, bound, *context)), modifiers=context)
    return _write(w)


ALL = (toggle_switch, brusselator, schnakenberg, phage_lambda)

if __name__ == "__main__":
    for make in ALL:
        print("wrote", make())
