"""Writes the small textbook models of sbml_models/ (equations from DESIGN.md).

Run `python sbml_models/build_small_models.py` to regenerate the .xml files; the
files are committed so that nobody needs this script to use them.
Species are amounts (hasOnlySubstanceUnits) in a unit compartment, so that the
kinetic laws are also the propensities of a stochastic simulation.
"""

from __future__ import annotations

from pathlib import Path

import libsbml

HERE = Path(__file__).resolve().parent


class ModelWriter:
    def __init__(self, model_id: str, name: str, notes: str):
        self.doc = libsbml.SBMLDocument(3, 2)
        self.m = self.doc.createModel()
        self.m.setId(model_id)
        self.m.setName(name)
        self.m.setTimeUnits("second")
        self.m.setNotes(f'<body xmlns="http://www.w3.org/1999/xhtml"><p>{notes}</p></body>')
        c = self.m.createCompartment()
        c.setId("cell")
        c.setSize(1.0)
        c.setConstant(True)
        c.setSpatialDimensions(3)

    def species(self, sid: str, amount: float) -> None:
        s = self.m.createSpecies()
        s.setId(sid)
        s.setCompartment("cell")
        s.setInitialAmount(amount)
        s.setHasOnlySubstanceUnits(True)
        s.setBoundaryCondition(False)
        s.setConstant(False)

    def parameter(self, pid: str, value: float, constant: bool = True) -> None:
        p = self.m.createParameter()
        p.setId(pid)
        p.setValue(value)
        p.setConstant(constant)

    def reaction(self, rid: str, reactants: dict, products: dict, law: str, modifiers=()) -> None:
        r = self.m.createReaction()
        r.setId(rid)
        r.setReversible(False)
        for sid, n in reactants.items():
            sr = r.createReactant()
            sr.setSpecies(sid)
            sr.setStoichiometry(n)
            sr.setConstant(True)
        for sid, n in products.items():
            sr = r.createProduct()
            sr.setSpecies(sid)
            sr.setStoichiometry(n)
            sr.setConstant(True)
        for sid in modifiers:
            r.createModifier().setSpecies(sid)
        kl = r.createKineticLaw()
        kl.setMath(_parse(law))

    def rate_rule(self, variable: str, formula: str) -> None:
        rr = self.m.createRateRule()
        rr.setVariable(variable)
        rr.setMath(_parse(formula))

    def write(self, filename: str) -> Path:
        self.doc.checkConsistency()
        errors = [self.doc.getError(i) for i in range(self.doc.getNumErrors())
                  if self.doc.getError(i).getSeverity() >= libsbml.LIBSBML_SEV_ERROR]
        if errors:
            raise RuntimeError(f"{filename}: " + "; ".join(e.getMessage() for e in errors))
        path = HERE / filename
        libsbml.writeSBMLToFile(self.doc, str(path))
        return path


def _parse(formula: str):
    ast = libsbml.parseL3Formula(formula)
    if ast is None:
        raise ValueError(f"cannot parse {formula!r}: {libsbml.getLastParseL3Error()}")
    return ast


def lotka_volterra() -> Path:
    w = ModelWriter("lotka_volterra", "Lotka-Volterra (Sharma thesis)",
                    "x1' = x1 (p1 - p2 x2), x2' = -x2 (p3 - p4 x1); p = (1, 0.01, 1, 0.02); "
                    "x1(0) = x2(0) = 50.")
    for pid, v in zip(("p1", "p2", "p3", "p4"), (1.0, 0.01, 1.0, 0.02)):
        w.parameter(pid, v)
    w.species("x1", 50)
    w.species("x2", 50)
    w.reaction("prey_birth", {"x1": 1}, {"x1": 2}, "p1 * x1")
    w.reaction("predation", {"x1": 1}, {}, "p2 * x1 * x2", modifiers=("x2",))
    w.reaction("predator_death", {"x2": 1}, {}, "p3 * x2")
    w.reaction("predator_birth", {}, {"x2": 1}, "p4 * x1 * x2", modifiers=("x1",))
    return w.write("lotka_volterra.xml")


def seir_linear() -> Path:
    w = ModelWriter("seir_linear", "SEIR, linear (Sharma thesis)",
                    "x1' = p1 N - (p1+p2) x1; x2' = p2 x1 - (p1+p3) x2; x3' = p3 x2 - (p1+p4) x3; "
                    "x4' = p4 x3 - p1 x4; p = (0.5, 0.1, 0.4, 0.2); x(0) = (700, 0, 300, 0); N = 1000.")
    for pid, v in zip(("p1", "p2", "p3", "p4", "N"), (0.5, 0.1, 0.4, 0.2, 1000.0)):
        w.parameter(pid, v)
    for sid, v in zip(("x1", "x2", "x3", "x4"), (700, 0, 300, 0)):
        w.species(sid, v)
    w.reaction("birth", {}, {"x1": 1}, "p1 * N")
    for sid in ("x1", "x2", "x3", "x4"):
        w.reaction(f"death_{sid}", {sid: 1}, {}, f"p1 * {sid}")
    w.reaction("exposure", {"x1": 1}, {"x2": 1}, "p2 * x1")
    w.reaction("onset", {"x2": 1}, {"x3": 1}, "p3 * x2")
    w.reaction("recovery", {"x3": 1}, {"x4": 1}, "p4 * x3")
    return w.write("seir_linear.xml")


def seir_epidemic() -> Path:
    # Rates are per day; values chosen by us (an influenza-like outbreak: R0 = beta /
    # (alpha + sigma) = 3.0, latency 1/gamma = 5 days), not taken from Kovac et al.
    w = ModelWriter("seir_epidemic", "SEIR, epidemic (Kovac et al. 2019)",
                    "S' = -beta S I / N, E' = beta S I / N - gamma E, I' = gamma E - alpha I - sigma I, "
                    "R' = sigma I. beta = 0.3, gamma = 0.2, alpha = 0.001, sigma = 0.099, N = 10000; "
                    "S(0) = 9990, E(0) = 0, I(0) = 10, R(0) = 0. Time in days.")
    for pid, v in zip(("beta", "gamma", "alpha", "sigma", "N"), (0.3, 0.2, 0.001, 0.099, 10000.0)):
        w.parameter(pid, v)
    for sid, v in zip(("S", "E", "I", "R"), (9990, 0, 10, 0)):
        w.species(sid, v)
    w.reaction("infection", {"S": 1}, {"E": 1}, "beta * S * I / N", modifiers=("I",))
    w.reaction("onset", {"E": 1}, {"I": 1}, "gamma * E")
    w.reaction("death", {"I": 1}, {}, "alpha * I")
    w.reaction("recovery", {"I": 1}, {"R": 1}, "sigma * I")
    return w.write("seir_epidemic.xml")


def lorenz() -> Path:
    w = ModelWriter("lorenz", "Lorenz system (DiffEqGPU benchmark)",
                    "x' = sigma (y - x), y' = x (rho - z) - y, z' = x y - beta z; sigma = 10, "
                    "beta = 8/3, rho = 28 (swept in the benchmark); x0 = (1, 0, 0); t in [0, 1].")
    w.parameter("sigma", 10.0)
    w.parameter("rho", 28.0)
    w.parameter("beta", 8.0 / 3.0)
    for pid, v in zip(("x", "y", "z"), (1.0, 0.0, 0.0)):
        w.parameter(pid, v, constant=False)
    w.rate_rule("x", "sigma * (y - x)")
    w.rate_rule("y", "x * (rho - z) - y")
    w.rate_rule("z", "x * y - beta * z")
    return w.write("lorenz.xml")


def decay_dimerisation() -> Path:
    w = ModelWriter("decay_dimerisation", "Decay-dimerisation (Gillespie 2001; Klingbeil et al. 2012)",
                    "S1 -> 0 (c1 S1), 2 S1 -> S2 (c2 S1 (S1 - 1) / 2), S2 -> 2 S1 (c3 S2), "
                    "S2 -> S3 (c4 S2); c = (1, 0.002, 0.5, 0.04); S(0) = (10000, 0, 0).")
    for pid, v in zip(("c1", "c2", "c3", "c4"), (1.0, 0.002, 0.5, 0.04)):
        w.parameter(pid, v)
    for sid, v in zip(("S1", "S2", "S3"), (10000, 0, 0)):
        w.species(sid, v)
    w.reaction("decay", {"S1": 1}, {}, "c1 * S1")
    w.reaction("dimerisation", {"S1": 2}, {"S2": 1}, "c2 * S1 * (S1 - 1) / 2")
    w.reaction("dissociation", {"S2": 1}, {"S1": 2}, "c3 * S2")
    w.reaction("conversion", {"S2": 1}, {"S3": 1}, "c4 * S2")
    return w.write("decay_dimerisation.xml")


ALL = (lotka_volterra, seir_linear, seir_epidemic, lorenz, decay_dimerisation)

if __name__ == "__main__":
    for make in ALL:
        print("wrote", make())
