"""--scaled-atol: a state that starts nonzero below atol / rtol is held to rtol x its
initial value (sbmlgpu.ode.tolerances, templates/adaptive.cuh's ode_start_atol).

The model: x grows logistically from x_init, far below atol, to K, beside a stiff
state y that relaxes at rate k = 400 (it lets the implicit methods take long steps
once y has settled). Its exact solution is known, and at rtol 1e-6 / atol 1e-12 every
method with the per-state tolerances follows it; with atol alone, rodas4, bdf and
scipy's LSODA had it 100-360 % off (Beer_MolBioSystems2014's init_Bac, docs/ode.md)."""

from __future__ import annotations

import numpy as np
import pytest

import sbmlgpu
from sbmlgpu.codegen.compile_check import nvcc_available, nvcc_compile
from sbmlgpu.ode.tolerances import FLOOR, start_atol

from .ode_helpers import needs_compiler

RATE, CAPACITY, STIFF = 3.5, 1e-3, 400.0
TIMES = np.array([0.0, 0.5, 1.0, 5.0, 10.0, 12.0, 15.0, 20.0])
TOLERANCES = {"rtol": 1e-6, "atol": 1e-12}
#: three members' starts: two far below atol, one above atol / rtol (atol unchanged)
STARTS = np.array([1e-20, 1e-16, 1e-4])


def _math(body: str) -> str:
    return f'<math xmlns="http://www.w3.org/1998/Math/MathML">{body}</math>'


LOGISTIC = (
    '<?xml version="1.0" encoding="UTF-8"?>'
    '<sbml xmlns="http://www.sbml.org/sbml/level3/version2/core" level="3" version="2">'
    '<model id="logistic_from_below_atol"><listOfParameters>'
    f'<parameter id="r" value="{RATE}" constant="true"/>'
    f'<parameter id="K" value="{CAPACITY}" constant="true"/>'
    f'<parameter id="k" value="{STIFF}" constant="true"/>'
    '<parameter id="x_init" value="1e-20" constant="true"/>'
    '<parameter id="x" value="0" constant="false"/>'
    '<parameter id="y" value="0" constant="false"/>'
    '</listOfParameters><listOfInitialAssignments>'
    '<initialAssignment symbol="x">' + _math("<ci>x_init</ci>") + '</initialAssignment>'
    '</listOfInitialAssignments><listOfRules>'
    '<rateRule variable="x">' + _math(
        "<apply><times/><ci>r</ci><ci>x</ci><apply><minus/><cn>1</cn>"
        "<apply><divide/><ci>x</ci><ci>K</ci></apply></apply></apply>") + '</rateRule>'
    '<rateRule variable="y">' + _math(
        "<apply><times/><ci>k</ci><apply><minus/><cn>1</cn><ci>y</ci></apply></apply>")
    + '</rateRule></listOfRules></model></sbml>')


def exact(x0):
    """The logistic's solution at TIMES, (members, times)."""
    x0 = np.asarray(x0, float)[:, None]
    return CAPACITY / (1 + (CAPACITY / x0 - 1) * np.exp(-RATE * TIMES))


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("scaled_atol") / "logistic.xml"
    path.write_text(LOGISTIC)
    return sbmlgpu.load(str(path))


def _x(result) -> np.ndarray:
    return result.data[:, :, list(result.ids).index("x")]


def _run(model, backend, device="cpu", **options):
    return sbmlgpu.run(model, backend, times=TIMES, parameters={"x_init": STARTS},
                       options={**TOLERANCES, **options}, device=device, progress=False)


def test_the_tolerances_are_tighter_only_for_nonzero_starts_below_atol_over_rtol():
    x0 = np.array([1e-20, -1e-20, 0.0, 1e-7, 1e-5, 3.0, 1e-300])
    got = start_atol(x0, 1e-6, 1e-12)
    assert got == pytest.approx([1e-26, 1e-26, 1e-12, 1e-13, 1e-12, 1e-12, FLOOR], rel=1e-12)
    # states first, members after: each member its own
    table = np.array([[1e-20, 1.0], [0.0, 1e-9]])
    assert start_atol(table, 1e-6, 1e-12) == pytest.approx(
        np.array([[1e-26, 1e-12], [1e-12, 1e-15]]), rel=1e-12)


@pytest.mark.parametrize("method", ["dopri5", "rodas4", "bdf"])
def test_a_state_that_starts_far_below_atol_grows_right_on_the_cpu_path(model, method):
    needs_compiler()
    result = _run(model, "ode", method=method, cpu_engine="native")
    assert np.all(result.status == 0)
    # bdf's global error over 16 orders of growth: 1.3e-4 at rtol 1e-6
    np.testing.assert_allclose(_x(result), exact(STARTS), rtol=1e-3)


def test_the_numpy_engine_and_the_reference_hold_the_same_rule(model):
    numpy_engine = _run(model, "ode", method="dopri5", cpu_engine="numpy")
    np.testing.assert_allclose(_x(numpy_engine), exact(STARTS), rtol=1e-3)
    for method in ("LSODA", "BDF", "Radau"):  # off by default there (its README)
        reference = _run(model, "reference", method=method, scaled_atol=True)
        np.testing.assert_allclose(_x(reference), exact(STARTS), rtol=1e-3)
    from sbmlgpu.plugins.reference.backend import ReferenceOptions

    assert ReferenceOptions().scaled_atol is False


def test_off_every_state_has_atol_and_the_kernel_keeps_no_array(model):
    """--no-scaled-atol: the kernel is the one before the option (no per-state
    tolerances); the member that starts above atol / rtol is the same either way."""
    from sbmlgpu.ode.model import KernelModel
    from sbmlgpu.plugins.ode.program import default_outputs, kernel_source
    from sbmlgpu.views import ode_system

    kernel_model = KernelModel(ode_system(model), ("x_init",), default_outputs(model))
    on = kernel_source(kernel_model, "rodas4")
    off = kernel_source(kernel_model, "rodas4", scaled_atol=False)
    assert "ode_start_atol(" in on.text and "ode_start_atol(" not in off.text
    assert "real_t atol[ODE_NX];" in on.text and "real_t atol[ODE_NX];" not in off.text
    needs_compiler()
    scaled = _run(model, "ode", method="rodas4", cpu_engine="native")
    plain = _run(model, "ode", method="rodas4", cpu_engine="native", scaled_atol=False)
    np.testing.assert_allclose(_x(plain)[2], _x(scaled)[2], rtol=1e-12)
    assert scaled.metadata["options"]["scaled_atol"] is True
    assert plain.metadata["options"]["scaled_atol"] is False


@pytest.mark.skipif(not nvcc_available(), reason="nvcc not found")
@pytest.mark.parametrize("method", ["dopri5", "rodas4", "bdf"])
@pytest.mark.parametrize("precision", ["double", "float"])
@pytest.mark.parametrize("scaled", [True, False])
def test_kernels_with_and_without_it_compile_for_sm90(model, method, precision, scaled):
    from sbmlgpu.ode.model import KernelModel
    from sbmlgpu.plugins.ode.program import default_outputs, kernel_source
    from sbmlgpu.views import ode_system

    kernel_model = KernelModel(ode_system(model), ("x_init",), default_outputs(model))
    src = kernel_source(kernel_model, method, precision, scaled_atol=scaled, refill=True)
    assert nvcc_compile(src.text, "sm_90", name=src.name)


@pytest.mark.gpu
@pytest.mark.parametrize("method", ["dopri5", "rodas4", "bdf"])
def test_on_the_gpu_each_member_has_its_own_tolerances(model, method, gpu_device):
    gpu = _run(model, "ode", device=[gpu_device.index], method=method)
    assert np.all(gpu.status == 0)
    np.testing.assert_allclose(_x(gpu), exact(STARTS), rtol=1e-3)


#: a state whose exact rate is 0 but computed as a difference of O(1) terms: C' =
#: kc (A + B - T) with A + B = T conserved, C starting at 1e-14 (the review's model)
NOISE = (
    '<?xml version="1.0" encoding="UTF-8"?>'
    '<sbml xmlns="http://www.sbml.org/sbml/level3/version2/core" level="3" version="2">'
    '<model id="rate_of_rounding_noise"><listOfParameters>'
    '<parameter id="k" value="0.7" constant="true"/>'
    '<parameter id="kc" value="3" constant="true"/>'
    '<parameter id="T" value="0.3" constant="true"/>'
    '<parameter id="A" value="0.3" constant="false"/>'
    '<parameter id="B" value="0" constant="false"/>'
    '<parameter id="C" value="1e-14" constant="false"/>'
    '</listOfParameters><listOfRules>'
    '<rateRule variable="A">' + _math(
        "<apply><times/><apply><minus/><ci>k</ci></apply><ci>A</ci></apply>") + '</rateRule>'
    '<rateRule variable="B">' + _math("<apply><times/><ci>k</ci><ci>A</ci></apply>")
    + '</rateRule>'
    '<rateRule variable="C">' + _math(
        "<apply><times/><ci>kc</ci><apply><minus/><apply><plus/><ci>A</ci><ci>B</ci>"
        "</apply><ci>T</ci></apply></apply>") + '</rateRule>'
    '</listOfRules></model></sbml>')


@pytest.mark.parametrize("method", ["rodas4", "bdf"])
def test_a_state_whose_rate_is_rounding_noise_is_never_silently_wrong(tmp_path, method):
    """The per-state tolerance of C (1e-22) is below its rate's rounding noise: the
    member either follows C = 1e-14 to its tolerance or stops with a status whose
    message says to try --no-scaled-atol; with that, atol holds for C and it finishes.
    (dopri5 finishes either way, in 5,962 steps against 65, C 61 % off 1e-14: within
    atol, not within its own tolerance; docs/ode.md names this limitation.)"""
    needs_compiler()
    path = tmp_path / "noise.xml"
    path.write_text(NOISE)
    model = sbmlgpu.load(str(path))
    times = np.linspace(0, 10, 11)

    def run(**options):
        return sbmlgpu.run(model, "ode", times=times, device="cpu", progress=False,
                           options={"method": method, "cpu_engine": "native", **options})

    scaled, plain = run(), run(scaled_atol=False)
    c = list(scaled.ids).index("C")
    if scaled.status[0] == 0:
        np.testing.assert_allclose(scaled.data[0, :, c], 1e-14, rtol=1e-3)
    else:  # as it is at 3c3cdf9: max_steps_per_interval between t = 0 and 1
        [(member, _, message)] = scaled.failures()
        assert member == 0 and "try --no-scaled-atol" in message
    assert plain.status[0] == 0
    np.testing.assert_allclose(plain.data[0, :, c], 1e-14, atol=1e-10)


def test_the_gpu_engine_path_with_lanes_that_refill_holds_each_members_tolerances(model):
    """The GPU path (batches, the refill kernel, bundling off: three members) on a fake
    device whose kernels are the same source built for the host."""
    from sbmlgpu.plugins.ode.backend import OdeBackend
    from sbmlgpu.plugins.ode.options import OdeOptions
    from sbmlgpu.schedule import Scheduler
    from sbmlgpu.tasks import TimeCourse

    from .fakes import FakeDevice
    from .test_ode_engine_fake import compile_for_host

    needs_compiler()
    device = FakeDevice(compile=compile_for_host)
    for method in ("rodas4", "bdf"):
        options = OdeOptions(method=method, **TOLERANCES).validate()
        program = OdeBackend().compile(model, options, device)
        task = TimeCourse(times=TIMES, parameters={"x_init": STARTS}, progress=False)
        result = program.run(task, Scheduler(devices=[device], progress=False))
        assert result.metadata["engine"] == "gpu"
        assert result.metadata["lanes"].startswith("refill")
        assert np.all(result.status == 0)
        np.testing.assert_allclose(_x(result), exact(STARTS), rtol=1e-3)


def test_the_tolerances_come_from_the_state_after_the_events_at_t0(tmp_path):
    """x starts at 1 and an event at t0 sets it to 1e-20: its tolerance is rtol x 1e-20
    (from the state the integration starts with), not atol (from x = 1)."""
    needs_compiler()
    text = LOGISTIC.replace(
        '<initialAssignment symbol="x">' + _math("<ci>x_init</ci>") + '</initialAssignment>',
        '<initialAssignment symbol="x">' + _math("<cn>1</cn>") + '</initialAssignment>'
    ).replace('</listOfRules>', '</listOfRules><listOfEvents><event useValuesFromTriggerTime="true">'
              '<trigger initialValue="false" persistent="true">' + _math(
                  "<apply><geq/><csymbol encoding=\"text\" definitionURL=\"http://www.sbml.org"
                  "/sbml/symbols/time\">t</csymbol><cn>0</cn></apply>") + '</trigger>'
              '<listOfEventAssignments><eventAssignment variable="x">'
              + _math("<ci>x_init</ci>") + '</eventAssignment></listOfEventAssignments>'
              '</event></listOfEvents>')
    path = tmp_path / "event_at_t0.xml"
    path.write_text(text)
    net = sbmlgpu.load(str(path))
    for method in ("rodas4", "bdf"):
        result = _run(net, "ode", method=method, cpu_engine="native")
        assert np.all(result.status == 0)
        np.testing.assert_allclose(_x(result)[:, 1:], exact(STARTS)[:, 1:], rtol=1e-3)
