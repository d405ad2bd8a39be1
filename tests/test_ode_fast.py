"""Fast reactions (SBML fast="true") in the ode backend's kernel (templates/fast.cuh):
rates scaled as the CPU reference scales them, the state relaxed onto the fast
equilibrium at the start and after events, on the native CPU path (the host build of
the kernel) against the reference; a fast subsystem without equilibrium fails the
member; the kernels compile for sm_90."""

from __future__ import annotations

import numpy as np
import pytest

import sbmlgpu
from sbmlgpu.codegen.compile_check import nvcc_available, nvcc_compile
from sbmlgpu.ode.model import KernelModel
from sbmlgpu.plugins.ode.program import default_outputs, kernel_source
from sbmlgpu.reference import simulate
from sbmlgpu.reference.fast import with_fast_factor
from sbmlgpu.results import Status
from sbmlgpu.views import ode_system

from .ode_helpers import needs_compiler, run_cpu

needs_nvcc = pytest.mark.skipif(not nvcc_available(), reason="nvcc not found")
MATH = 'xmlns="http://www.w3.org/1998/Math/MathML"'


def _reaction(rid: str, reactants: list[str], products: list[str], law: str, fast: bool) -> str:
    refs = lambda ids: "".join(  # noqa: E731
        f'<speciesReference species="{s}" stoichiometry="1" constant="true"/>' for s in ids)
    return (f'<reaction id="{rid}" reversible="false" fast="{str(fast).lower()}">'
            + (f"<listOfReactants>{refs(reactants)}</listOfReactants>" if reactants else "")
            + (f"<listOfProducts>{refs(products)}</listOfProducts>" if products else "")
            + f'<kineticLaw><math {MATH}>{law}</math></kineticLaw></reaction>')


def fast_binding(events: str = "") -> str:
    """A + B <-> C fast (kf = 10, kr = 1), C -> 0 slow (kd = 0.3); A = 2, B = 1, C = 0
    at the start, which is far from the fast equilibrium."""
    species = "".join(f'<species id="{s}" compartment="cell" initialAmount="{v}" '
                      f'hasOnlySubstanceUnits="true" boundaryCondition="false" '
                      f'constant="false"/>' for s, v in (("A", 2.0), ("B", 1.0), ("C", 0.0)))
    params = "".join(f'<parameter id="{k}" value="{v}" constant="true"/>'
                     for k, v in (("kf", 10.0), ("kr", 1.0), ("kd", 0.3)))
    reactions = (
        _reaction("bind", ["A", "B"], ["C"], "<apply><minus/><apply><times/><ci>kf</ci>"
                  "<ci>A</ci><ci>B</ci></apply><apply><times/><ci>kr</ci><ci>C</ci></apply>"
                  "</apply>", True)
        + _reaction("decay", ["C"], [], "<apply><times/><ci>kd</ci><ci>C</ci></apply>", False))
    return ('<?xml version="1.0" encoding="UTF-8"?>'
            '<sbml xmlns="http://www.sbml.org/sbml/level3/version1/core" level="3" version="1">'
            '<model id="fast_binding"><listOfCompartments><compartment id="cell" size="1" '
            'spatialDimensions="3" constant="true"/></listOfCompartments>'
            f"<listOfSpecies>{species}</listOfSpecies>"
            f"<listOfParameters>{params}</listOfParameters>"
            f"<listOfReactions>{reactions}</listOfReactions>"
            + (f"<listOfEvents>{events}</listOfEvents>" if events else "")
            + "</model></sbml>")


KICK = ('<event id="kick" useValuesFromTriggerTime="true"><trigger initialValue="false" '
        f'persistent="true"><math {MATH}><apply><geq/><csymbol encoding="text" '
        'definitionURL="http://www.sbml.org/sbml/symbols/time">t</csymbol><cn>1.5</cn>'
        '</apply></math></trigger><listOfEventAssignments><eventAssignment variable="A">'
        f'<math {MATH}><apply><plus/><ci>A</ci><cn>3</cn></apply></math></eventAssignment>'
        '</listOfEventAssignments></event>')


@pytest.mark.parametrize("events", ["", KICK], ids=["start", "event"])
def test_fast_equilibrium_at_the_start_and_after_events_matches_the_reference(events):
    needs_compiler()
    net = sbmlgpu.load(fast_binding(events))
    times = np.linspace(0.0, 3.0, 31)
    result = run_cpu(net, "rodas4", times=times, rtol=1e-9, atol=1e-12)
    assert result.status[0] == Status.ok
    ids = list(result.ids)
    # Radau: the reference's default LSODA fails on this model at t = 0 ("repeated
    # convergence failures"), a limit of the reference that this test does not test
    traj = simulate(net, times, rtol=1e-9, atol=1e-12, method="Radau")
    assert traj.ok, traj.message
    expected = traj.evaluate(ids, "value")
    got = result.data[0]
    assert np.allclose(got, expected, rtol=1e-4, atol=1e-7)
    a, b, c = (got[:, ids.index(s)] for s in ("A", "B", "C"))
    # at t0 already on the equilibrium kf A B = kr C, with A + C and B + C conserved
    assert abs(10.0 * a[0] * b[0] - c[0]) < 1e-6
    assert abs(a[0] + c[0] - 2.0) < 1e-9 and abs(b[0] + c[0] - 1.0) < 1e-9


def test_a_fast_subsystem_without_equilibrium_fails_the_member():
    """0 -> A fast at a constant rate: no equilibrium to relax to."""
    needs_compiler()
    text = fast_binding().replace(
        "</listOfReactions>", _reaction("source", [], ["A"], "<cn>1</cn>", True)
        + "</listOfReactions>")
    result = run_cpu(sbmlgpu.load(text), "rodas4", times=np.linspace(0.0, 1.0, 3))
    assert result.status[0] == Status.failed
    assert "fast reactions reached no equilibrium" in result.messages[0]


def test_fast_reactions_are_accepted_and_named_in_the_kernel():
    from sbmlgpu.plugins.ode.support import unsupported

    net = sbmlgpu.load(fast_binding())
    assert unsupported(net) == []
    model = KernelModel(ode_system(with_fast_factor(net)), (), default_outputs(net))
    src = kernel_source(model, "rodas4")
    assert "model_fast_jacobian" in src.text and "ode_relax(t, S.x, p, &cfg)" in src.text


def test_the_numpy_cpu_engine_refuses_fast_reactions_by_name():
    from sbmlgpu.errors import UnsupportedModelError

    with pytest.raises(UnsupportedModelError, match="fast reactions.*numpy CPU engine"):
        run_cpu(sbmlgpu.load(fast_binding()), "rodas4", times=[0.0, 1.0], cpu_engine="numpy")


@needs_nvcc
@pytest.mark.parametrize("method", ["dopri5", "rodas4"])
def test_fast_kernels_compile_for_sm90(method):
    net = sbmlgpu.load(fast_binding(KICK))
    model = KernelModel(ode_system(with_fast_factor(net)), (), default_outputs(net))
    src = kernel_source(model, method)
    assert nvcc_compile(src.text, "sm_90", name=src.name)
