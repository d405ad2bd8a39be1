"""Shared pieces of the ode backend's tests: small models as SBML text, runs on the CPU path."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import sbmlgpu

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "sbml_models"


def needs_compiler():
    from sbmlgpu.plugins.ode.native import host_compiler

    if host_compiler() is None:
        pytest.skip("no C++ compiler for the native CPU path")


def load(name: str):
    return sbmlgpu.load(str(MODELS / f"{name}.xml"))


def rate_rule_model(rules: dict[str, tuple[float, str]], parameters: dict[str, float] = None,
                    events: str = "") -> str:
    """An SBML L3V2 model of parameters with rate rules given as MathML bodies:
    rules = {id: (initial value, '<apply>...</apply>')}."""
    parameters = parameters or {}
    params = "".join(f'<parameter id="{k}" value="{v}" constant="true"/>'
                     for k, v in parameters.items())
    params += "".join(f'<parameter id="{k}" value="{v0}" constant="false"/>'
                      for k, (v0, _) in rules.items())
    rate_rules = "".join(
        f'<rateRule variable="{k}"><math xmlns="http://www.w3.org/1998/Math/MathML">{m}</math>'
        f'</rateRule>' for k, (_, m) in rules.items())
    return ('<?xml version="1.0" encoding="UTF-8"?>'
            '<sbml xmlns="http://www.sbml.org/sbml/level3/version2/core" level="3" version="2">'
            '<model id="m">'
            f'<listOfParameters>{params}</listOfParameters>'
            f'<listOfRules>{rate_rules}</listOfRules>'
            + (f"<listOfEvents>{events}</listOfEvents>" if events else "")
            + '</model></sbml>')


def ci(name: str) -> str:
    return f"<ci>{name}</ci>"


def cn(value) -> str:
    return f"<cn>{value}</cn>"


def apply(op: str, *args: str) -> str:
    return f"<apply><{op}/>{''.join(args)}</apply>"


def run_cpu(model, method: str = "dopri5", *, times=None, end=None, points=None,
            parameters=None, summary=False, **options):
    from sbmlgpu.api import run

    opts = {"cpu_engine": "native", "method": method, **options}
    return run(model, "ode", times=times, end=end, points=points, parameters=parameters,
               summary=summary, options=opts, device="cpu", progress=False)


def reference(model, times, parameters=None, ids=None, rtol=1e-11, atol=1e-13):
    from sbmlgpu import reference as ref

    net = model if not isinstance(model, (str, Path)) else sbmlgpu.load(str(model))
    traj = ref.simulate(net, np.asarray(times, float), parameters=parameters, rtol=rtol,
                        atol=atol)
    assert traj.ok, traj.message
    return traj.evaluate(list(ids), "value")
