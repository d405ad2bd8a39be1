"""A loaded model run again reuses its ode program (core's sbmlgpu.api.compiled_program):
the ODE view, generated kernels, compiled engines and the stiffness check's probes and
answers, so that PEtab's stages and a script's repeated runs pay for them once; the
results are those of a fresh program."""

from __future__ import annotations

import numpy as np
import pytest

from .ode_helpers import load, needs_compiler

TIMES = np.linspace(0, 100, 11)


@pytest.fixture(scope="module")
def net():
    needs_compiler()
    return load("seir_epidemic")


def test_the_same_network_options_and_device_give_the_same_program(net):
    from sbmlgpu.api import compiled_program
    from sbmlgpu.plugins.ode.backend import OdeBackend
    from sbmlgpu.plugins.ode.options import OdeOptions

    backend = OdeBackend()
    first = compiled_program(backend, net, OdeOptions().validate(), None)
    assert compiled_program(backend, net, OdeOptions().validate(), None) is first
    assert compiled_program(backend, net, OdeOptions(rtol=1e-8).validate(), None) is not first
    assert compiled_program(backend, load("seir_epidemic"), OdeOptions().validate(),
                            None) is not first


def test_a_repeated_run_generates_and_checks_nothing_again(net, monkeypatch):
    import sbmlgpu.plugins.ode.program as program
    import sbmlgpu.plugins.ode.stiffness as stiffness
    from sbmlgpu.api import execute, time_course

    counts = {"kernel_source": 0, "choose_method": 0}

    def counting(name, real):
        def wrapper(*args, **kw):
            counts[name] += 1
            return real(*args, **kw)
        return wrapper

    # (the program imports choose_method from stiffness.py at each check)
    for module, name in ((program, "kernel_source"), (stiffness, "choose_method")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, counting(name, real))
    rng = np.random.default_rng(1)
    params = {"beta": rng.uniform(0.1, 1.0, 50)}
    options = {"rtol": 1e-7}  # a key no other test uses: a program made here
    runs = [execute(net, time_course(times=TIMES, parameters=params, progress=False), "ode",
                    options=options, device="cpu") for _ in range(2)]
    assert counts == {"kernel_source": 1, "choose_method": 1}
    assert np.array_equal(runs[0].result.data, runs[1].result.data)
    # another set of members: the stiffness check runs again, on the kept probe
    other = {"beta": rng.uniform(0.1, 1.0, 50)}
    third = execute(net, time_course(times=TIMES, parameters=other, progress=False), "ode",
                    options=options, device="cpu")
    assert counts == {"kernel_source": 1, "choose_method": 2}
    # a fresh program (another Network object of the same model) computes the same
    fresh = execute(load("seir_epidemic"), time_course(times=TIMES, parameters=other,
                                                       progress=False),
                    "ode", options=options, device="cpu")
    assert np.array_equal(third.result.data, fresh.result.data)


def test_sources_are_the_kernels_of_the_last_run(net):
    from sbmlgpu.api import compiled_program, execute, time_course
    from sbmlgpu.plugins.ode.backend import OdeBackend
    from sbmlgpu.plugins.ode.options import OdeOptions

    options = {"rtol": 1e-5}
    execute(net, time_course(times=TIMES, progress=False), "ode", options=options,
            device="cpu")
    execute(net, time_course(times=TIMES, parameters={"beta": [0.2, 0.4]}, progress=False),
            "ode", options=options, device="cpu")
    program = compiled_program(OdeBackend(), net, OdeOptions.from_mapping(options).validate(),
                               None)  # as execute does
    assert len(program.sources) == 1  # the second run's kernel only
    assert "beta" in next(iter(program.sources.values()))


def test_a_repeated_identical_run_keeps_its_kernel_as_the_source(net):
    """The second of two identical runs takes everything from the kept specialisation:
    `sources` (what --keep-source writes) must still be that run's kernel."""
    from sbmlgpu.api import compiled_program, execute, time_course
    from sbmlgpu.plugins.ode.backend import OdeBackend
    from sbmlgpu.plugins.ode.options import OdeOptions

    options = {"rtol": 3e-6}  # a key no other test uses
    task = dict(times=TIMES, parameters={"beta": [0.3, 0.5]}, progress=False)
    execute(net, time_course(**task), "ode", options=options, device="cpu")
    program = compiled_program(OdeBackend(), net, OdeOptions.from_mapping(options).validate(),
                               None)
    first = program.sources
    execute(net, time_course(**task), "ode", options=options, device="cpu")
    assert program.sources == first and "beta" in next(iter(first.values()))
