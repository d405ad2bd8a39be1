"""sbmlgpu.ode's code generation on its own: the SBML ids the kernel names (the table
at its top, the comment on every generated assignment), CSE temporaries of the
kernel's real type, no `(void)` for used arguments, the sparse LU, and the summary
kernels under nvcc."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import sbmlgpu
from sbmlgpu.codegen.compile_check import nvcc_available, nvcc_compile
from sbmlgpu.codegen.templates import render
from sbmlgpu.ode.model import KernelModel
from sbmlgpu.plugins.ode.program import default_outputs, kernel_source
from sbmlgpu.views import ode_system

from .ode_helpers import apply, ci, cn, load, rate_rule_model
from .shared_data import SEMANTIC

needs_nvcc = pytest.mark.skipif(not nvcc_available(), reason="nvcc not found")

_MATH = '<math xmlns="http://www.w3.org/1998/Math/MathML">{}</math>'


def predator_prey():
    """Lotka-Volterra with SBML ids prey/predator, a varied and fixed parameters, and
    an event (a harvest when prey exceed 80)."""
    prey, predator = ci("prey"), ci("predator")
    rules = {"prey": (50.0, apply("times", prey, apply("minus", ci("a"),
                                                         apply("times", ci("b"), predator)))),
             "predator": (20.0, apply("times", predator,
                                      apply("minus", apply("times", ci("d"), prey), ci("c"))))}
    event = ('<event id="harvest" useValuesFromTriggerTime="true">'
             '<trigger initialValue="true" persistent="true">'
             + _MATH.format(apply("gt", prey, cn(80))) + '</trigger><listOfEventAssignments>'
             '<eventAssignment variable="prey">' + _MATH.format(apply("times", cn(0.5), prey))
             + '</eventAssignment></listOfEventAssignments></event>')
    return sbmlgpu.load(rate_rule_model(rules, {"a": 1.0, "b": 0.01, "c": 1.0, "d": 0.02},
                                        events=event))


def source_of(net, method="dopri5", varied=(), precision="double"):
    model = KernelModel(ode_system(net), tuple(varied), default_outputs(net))
    return model, kernel_source(model, method, precision)


def table_of(text: str) -> str:
    return text[text.index("SBML ids of this kernel's arrays"):text.index("*/", text.index(
        "SBML ids of this kernel's arrays"))]


def function_bodies(text: str) -> dict[str, str]:
    """{function name: body} of the C functions defined at the top level."""
    bodies = {}
    for m in re.finditer(r"\b(\w+)\(((?:(?!\*/)[^;{}])*)\)\s*\n\{\n(.*?)\n\}\n", text, re.S):
        bodies[m.group(1)] = m.group(3)
    return bodies


def test_the_shipped_lotka_volterra_kernel_names_its_states_next_to_x():
    net = load("lotka_volterra")
    species = [s.id for s in net.species]
    model, src = source_of(net, "rk4")
    table = table_of(src.text)
    for i, sid in enumerate(model.ode.state_ids):
        assert re.search(rf"x\[{i}\] = {sid} \(species", table), table
    assert set(model.ode.state_ids) == set(species)
    # every fixed parameter the kernel uses is listed with the value it is printed as
    for pid, value in (("p2", 0.01), ("p4", 0.02), ("x1 (initial value)", 50.0)):
        assert f"{pid} = {value!r}" in table
    rhs = function_bodies(src.text)["model_rhs"]
    for i, sid in enumerate(model.ode.state_ids):
        assert re.search(rf"^\s*dx\[{i}\] = .*; /\* {sid} \*/$", rhs, re.M), rhs


def test_prey_and_predator_are_named_in_the_table_and_on_every_assignment():
    net = predator_prey()
    model, src = source_of(net, "rodas4", varied=("a",))
    text, table = src.text, table_of(src.text)
    prey, predator = (model.ode.state_ids.index(s) for s in ("prey", "predator"))
    assert f"x[{prey}] = prey (parameter)" in table
    assert f"x[{predator}] = predator (parameter)" in table
    assert "p[0] = a" in table and "b = 0.01" in table and "d = 0.02" in table
    assert "prey (initial value) = 50.0" in table
    assert re.search(r"g\[0\] = .*prey.* from  prey > 80 \(event harvest\)", table), table
    assert re.search(r"events\s+0 = harvest", table)
    bodies = function_bodies(text)
    assert re.search(rf"dx\[{prey}\] = .*; /\* prey \*/", bodies["model_rhs"])
    assert re.search(rf"dx\[{predator}\] = .*; /\* predator \*/", bodies["model_rhs"])
    assert re.search(rf"x\[{prey}\] = .*; /\* prey \*/", bodies["model_x0"])
    assert re.search(r"J\[\d+\] = .*; /\* d\(prey\)/d\(predator\) \*/", bodies["model_jacobian"])
    assert re.search(r"g\[0\] = .*; /\* event harvest \*/", bodies["model_atoms"])
    assert re.search(r"trig\[0\] = .*; /\* harvest \*/", bodies["model_triggers"])
    assert re.search(r"v\[0\] = .*; /\* prey \*/", bodies["model_event_values_0"])
    assert "p[0] = table[0LL * n + i]; /* a */" in text
    # every generated assignment of the model functions carries its comment
    for name, body in bodies.items():
        if name.startswith("model_"):
            for line in body.splitlines():
                if re.match(r"\s*(dx|x|y|J|ft|g|trig|v)\[\d+\] = ", line):
                    assert re.search(r"; /\* \S.* \*/$", line), (name, line)


@pytest.mark.parametrize("precision,real", [("double", "double"), ("float", "float")])
def test_cse_temporaries_are_real_t(precision, real):
    model, src = source_of(load("seir_epidemic"), "rodas4", precision=precision)
    temporaries = re.findall(r"const (\w+) cse_\d+ =", src.text)
    assert temporaries and set(temporaries) == {"real_t"}
    assert f"typedef {real} real_t;" in src.text


CASES = ["00978", "01466", "00072", "00426", "00948"]


def _nets():
    yield "lorenz", load("lorenz"), ("rho",)
    yield "BIOMD0000000035", load("BIOMD0000000035"), ()
    yield "predator_prey", predator_prey(), ("a",)
    for case in CASES:
        path = SEMANTIC / case / f"{case}-sbml-l3v2.xml"
        if path.is_file():
            yield case, sbmlgpu.load(str(path)), ()


@pytest.mark.parametrize("method", ["rk4", "dopri5", "rodas4"])
def test_no_void_cast_of_an_argument_the_function_uses(method):
    checked = 0
    for name, net, varied in _nets():
        _, src = source_of(net, method, varied=varied)
        for function, body in function_bodies(src.text).items():
            body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)  # comments name SBML ids
            casts = re.findall(r"\(void\)(\w+);", body)
            rest = re.sub(r"\(void\)\w+;", "", body)
            for argument in casts:
                assert not re.search(rf"\b{argument}\b", rest), (name, function, argument)
            checked += bool(casts)
    assert checked > 10


def test_features_a_model_lacks_leave_no_functions_behind():
    """Without delays, priorities, values from trigger time or non-persistent events
    the event functions of those features are not generated."""
    _, src = source_of(predator_prey(), "dopri5")
    for absent in ("ode_event_delay", "ode_next_due", "ode_event_priority",
                   "ode_event_persistent", "model_event_priority_", "model_event_delay_"):
        assert absent not in src.text, absent
    assert "ode_value_offset" in src.text  # harvest uses values from trigger time
    _, plain = source_of(load("lorenz"), "rk4")
    assert "ode_events" not in plain.text and "model_atoms" not in plain.text


def _run_plan(plan, M, b):
    """The generated sparse LU and solve, executed in Python (the C text is plain
    arithmetic on A, d, b, ok)."""
    from sbmlgpu.ode.sparse_lu import lu_code, solve_code

    A = [float(M[i, j]) for i, j in plan.entries]
    d = [0.0] * plan.n
    b = [float(v) for v in b]
    ok = True
    code = lu_code(plan, "") + "\n" + solve_code(plan, "")
    code = re.sub(r"ODE_R\(([^)]*)\)", r"float(\1)", code)
    code = code.replace("&&", "and").replace(";", "").replace("ode_finite(", "math.isfinite(")

    scope = {"A": A, "d": d, "b": b, "ok": ok, "math": math}
    exec(code, scope)  # noqa: S102 - our own generated arithmetic
    return np.array(scope["b"]), scope["ok"]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sparse_lu_plan_solves_the_system(seed):
    from sbmlgpu.ode.sparse_lu import plan as make_plan

    rng = np.random.default_rng(seed)
    n = 40
    mask = rng.random((n, n)) < 0.08
    pattern = {(i, j) for i in range(n) for j in range(n) if mask[i, j] and i != j}
    plan = make_plan(pattern, n)
    M = np.zeros((n, n))
    for i, j in pattern:
        M[i, j] = rng.normal()
    M += np.diag(5.0 + rng.random(n))  # I/(gamma h) dominates, as for small steps
    b = rng.normal(size=n)
    x, ok = _run_plan(plan, M, b)
    assert ok
    assert np.allclose(x, np.linalg.solve(M, b), rtol=1e-10, atol=1e-12)
    dense_fill = n * n
    assert plan.nnz < dense_fill / 2  # the Markowitz order keeps it sparse


@needs_nvcc
@pytest.mark.parametrize("precision", ["double", "float"])
def test_summary_kernels_compile_for_sm90(precision):
    text = render("sbmlgpu.ode", "summary.cu", precision=precision)
    assert nvcc_compile(text, "sm_90", name=f"summary_{precision}")


def test_an_analytic_jacobian_the_model_does_not_allow_is_an_option_error():
    from sbmlgpu.errors import OptionError
    from sbmlgpu.ode.codegen import choose_jacobian

    # d floor(x)/dx stays an unevaluated Derivative in sympy
    net = sbmlgpu.load(rate_rule_model({"x": (1.5, apply("floor", ci("x")))}))
    model = KernelModel(ode_system(net), (), ("x",))
    assert choose_jacobian(model, "auto") == "fd"
    with pytest.raises(OptionError, match="option jacobian: analytic: sympy cannot "
                                          "differentiate.*use --jacobian fd"):
        choose_jacobian(model, "analytic")
