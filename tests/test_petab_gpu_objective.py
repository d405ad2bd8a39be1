"""The PEtab objective reduced on the device (sbmlgpu.petab.reduction, kernels/objective.cu)
without a GPU: a fake device runs the ode kernel and the objective kernel through their
host builds (the same text nvcc compiles), so that `simulate_problem(..., ensemble=N)` on
"the GPU" takes the reduction path end to end, and its nllh/chi2 must equal the CPU
path's numpy computation of today (likelihood.terms over the copied-back simulations).
The kernel text must also compile with nvcc -arch=sm_90 where nvcc is installed."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from tests.shared_data import MODELS

from .fakes import FakeDevice, FakeDriver, FakeKernel, FakeModule, HostBuffer
from .ode_helpers import needs_compiler
from .test_ode_engine_fake import compile_for_host, signatures

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning",
                                        "ignore::UserWarning")
petab = pytest.importorskip("petab.v1", reason="the petab extra is not installed")

BENCHMARK = MODELS / "petab-benchmark"
# {problem: whether it has rows at finite times (scored on the device)}: noise
# placeholders from the parameter table (Boehm); preequilibration and observable
# placeholders (Brannmark); several conditions (Fujita); only rows at t = inf, the
# steady states, which are scored on the host (Blasi)
PROBLEMS = {"Boehm_JProteomeRes2014": True, "Brannmark_JBC2010": True,
            "Fujita_SciSignal2010": True, "Blasi_CellSystems2016": False}
FOUND = {p for p in PROBLEMS if (BENCHMARK / p / f"{p}.yaml").is_file()}


def _yaml(name):
    if name not in FOUND:
        pytest.skip(f"no PEtab problem {name} in {BENCHMARK}")
    return BENCHMARK / name / f"{name}.yaml"


class HostObjective(FakeKernel):
    """The objective kernel's launch run through its host build, with the launch's
    own arguments (checked against the kernel's C signature first)."""

    def __init__(self, source: str, log: list):
        super().__init__("sbmlgpu_petab_objective", log=log)
        from sbmlgpu.runtime.host import load

        self.params = signatures(source)["sbmlgpu_petab_objective"]
        self.library = load("#define SBMLGPU_HOST_ENTRY 1\n" + source, "objective.cu",
                            openmp=False)
        self.launched = 0
        self.first_members: list[tuple[bool, int]] = []  # (members given, first_member)

    def run(self, grid, block, args, shared_bytes):
        assert len(args) == len(self.params) == 17, (len(args), self.params)

        def c(arg, ctype):
            if ctype == "pointer":
                assert isinstance(arg, HostBuffer) or arg == 0, type(arg)
                return arg.data.ctypes.data_as(ctypes.c_void_p) \
                    if isinstance(arg, HostBuffer) else None
            return {"long long": ctypes.c_longlong, "int": ctypes.c_int,
                    "unsigned long long": ctypes.c_ulonglong}[ctype](int(arg))

        assert grid[0] * block[0] >= int(args[0])  # every member has a thread
        self.first_members.append((isinstance(args[5], HostBuffer), int(args[6])))
        self.library.sbmlgpu_petab_objective_host(*[c(a, t) for a, t in zip(args, self.params)])
        self.launched += 1


@pytest.fixture
def fake_gpu(monkeypatch):
    needs_compiler()
    from sbmlgpu import runtime

    objectives: list[HostObjective] = []

    def compile(device, source):
        if "sbmlgpu_petab_objective" in source:
            objectives.append(HostObjective(source, device.launches))
            return FakeModule(["sbmlgpu_petab_objective"], lambda _: objectives[-1])
        return compile_for_host(device, source)

    device = FakeDevice(compile=compile)
    monkeypatch.setattr(runtime, "get_driver", lambda: FakeDriver([device]))
    device.objectives = objectives
    return device


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_objective_on_the_device_equals_the_host_computation(name, fake_gpu):
    from sbmlgpu.petab import simulate_problem

    yaml = _yaml(name)
    gpu = simulate_problem(yaml, ensemble=40, seed=3, device=[0])
    # it ran there (every batch), or had no rows to score there
    assert bool(fake_gpu.objectives and fake_gpu.objectives[-1].launched) == PROBLEMS[name]
    cpu = simulate_problem(yaml, ensemble=40, seed=3, device="cpu")
    assert np.array_equal(gpu.status, cpu.status)
    ok = cpu.status == 0
    assert ok.sum() >= 20  # most sampled sets run: the comparison covers them
    np.testing.assert_allclose(gpu.nll[ok], cpu.nll[ok], rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(gpu.chi2[ok], cpu.chi2[ok], rtol=1e-12, atol=1e-9)
    # the time courses never came back: the rows at finite times have no simulation
    timed = np.isfinite(gpu.problem.measurements["time"].to_numpy(float))
    assert np.isnan(gpu.simulation[timed]).all() and timed.any() == PROBLEMS[name]


def test_a_bundled_ensemble_is_scored_from_the_columns_the_sink_wrote(fake_gpu):
    """Bundled in one batch, the sink writes member m in column m (member order): the
    objective kernel must read it there, not at the launch index."""
    from sbmlgpu.petab import simulate_problem

    # 6 runs x 64 sets: above 10 x the pilot, and a multiple of 32 (one aligned batch)
    yaml = _yaml("Fujita_SciSignal2010")
    options = {"pilot_size": 32}
    gpu = simulate_problem(yaml, ensemble=64, seed=4, device=[0], options=options)
    assert (True, 0) in fake_gpu.objectives[-1].first_members  # bundled, in member order
    cpu = simulate_problem(yaml, ensemble=64, seed=4, device="cpu", options=options)
    ok = cpu.status == 0
    assert np.array_equal(gpu.status, cpu.status) and ok.sum() >= 30
    np.testing.assert_allclose(gpu.nll[ok], cpu.nll[ok], rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(gpu.chi2[ok], cpu.chi2[ok], rtol=1e-12, atol=1e-9)


def test_the_nominal_run_keeps_its_simulation_table(fake_gpu):
    from sbmlgpu.petab import simulate_problem

    result = simulate_problem(_yaml("Boehm_JProteomeRes2014"), device=[0])
    assert not fake_gpu.objectives  # one member: simulated values, scored in numpy
    assert np.isfinite(result.simulation).all() and np.isfinite(result.llh)


def test_objective_kernel_compiles_with_nvcc():
    from sbmlgpu.codegen.compile_check import nvcc_available, nvcc_compile
    from sbmlgpu.petab.reduction import ObjectiveReduction
    from sbmlgpu.petab.observables import Formulas
    from sbmlgpu.petab.problem import load_problem
    from sbmlgpu.petab.simulate import Runs
    from sbmlgpu.petab.values import sampled_sets, set_count

    if not nvcc_available():
        pytest.skip("nvcc is not installed")
    problem = load_problem(_yaml("Blasi_CellSystems2016"))
    formulas = Formulas(problem)
    sets = sampled_sets(problem, 4, 0)
    reduction = ObjectiveReduction.build(formulas, Runs.of(problem), sets, set_count(sets),
                                         tuple(formulas.model_ids))
    for precision in ("double", "float"):
        assert nvcc_compile(reduction.source(precision), "sm_90", name=f"objective_{precision}")


def test_members_past_the_pass_budget_are_scored_on_the_host(fake_gpu, monkeypatch):
    """A GPU run's second pass of few members runs on the host's cores (host_pass.py),
    in an objective's run too: their time courses never reach the device, so the
    objective kernel's host build scores them, and the sets' nllh and chi2 equal the
    CPU path's (whose second pass is the same native build)."""
    from sbmlgpu.petab import simulate_problem
    from sbmlgpu.plugins.ode import host_pass

    passes = []
    run = host_pass.HostSecondPass.run

    def spy(self, members, *args, **kwargs):
        result = run(self, members, *args, **kwargs)
        passes.append((np.array(members), result))
        return result

    monkeypatch.setattr(host_pass.HostSecondPass, "run", spy)
    yaml = _yaml("Boehm_JProteomeRes2014")
    # a first-pass budget that some of the 40 sampled sets need more steps than
    options = {"pass_steps": 60}
    gpu = simulate_problem(yaml, ensemble=40, seed=3, device=[0], options=options)
    assert passes, "no member went to the host's second pass"
    members, result = passes[0]
    assert 0 < len(members) < 40
    assert set(result.reduced) == {"petab_nll", "petab_chi2"}
    assert result.data.shape[2] == 0  # scored there: no time courses kept
    assert fake_gpu.objectives[-1].launched  # the first pass's members on the device
    cpu = simulate_problem(yaml, ensemble=40, seed=3, device="cpu", options=options)
    assert np.array_equal(gpu.status, cpu.status)
    ok = cpu.status == 0
    assert ok.sum() >= 20
    # the host pass's sets among those compared
    assert ok[np.unique(members % 40)].any()
    np.testing.assert_allclose(gpu.nll[ok], cpu.nll[ok], rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(gpu.chi2[ok], cpu.chi2[ok], rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("precision", ["double", "float"])
def test_the_host_pass_scores_members_as_the_device_does(fake_gpu, monkeypatch, precision):
    """With one method throughout (rodas4), members scored on the host equal the same
    members scored on the device, in both precisions: the host's reduction reads the
    host pass's time courses in the kernel's own layout and real type."""
    from sbmlgpu.petab import simulate_problem
    from sbmlgpu.plugins.ode import host_pass

    ran = []
    run = host_pass.HostSecondPass.run

    def spy(self, members, *args, **kwargs):
        ran.append(len(members))
        return run(self, members, *args, **kwargs)

    monkeypatch.setattr(host_pass.HostSecondPass, "run", spy)
    yaml = _yaml("Boehm_JProteomeRes2014")
    options = {"method": "rodas4", "precision": precision}
    two = simulate_problem(yaml, ensemble=40, seed=3, device=[0],
                           options={**options, "pass_steps": 60})
    assert ran and 0 < ran[0] < 40
    one = simulate_problem(yaml, ensemble=40, seed=3, device=[0],
                           options={**options, "pass_steps": 0})
    assert np.array_equal(two.status, one.status)
    ok = one.status == 0
    assert ok.sum() >= 20
    np.testing.assert_array_equal(two.nll[ok], one.nll[ok])
    np.testing.assert_array_equal(two.chi2[ok], one.chi2[ok])


def test_the_reductions_tables_go_to_the_device_once_a_call_and_are_freed(fake_gpu):
    """A call of several launches uploads the rows' tables and q once (not per batch:
    14 copies of Bachmann's 10^5-set q took 0.2 s on the H200) and frees them after."""
    import dataclasses

    from sbmlgpu.petab import objective

    # a GPU of one small SM: the 6 x 200 members go in several launches
    fake_gpu.properties = dataclasses.replace(fake_gpu.properties, sm_count=1,
                                              max_threads_per_sm=64)
    # one method on both paths: left to choose, the GPU's method check picks rodas4 and
    # the CPU's bdf, whose NLLs differ by the integrators' tolerance, not by the tables
    options = {"method": "rodas4"}
    prepared = objective(_yaml("Fujita_SciSignal2010"), device=[0], options=options)
    from sbmlgpu.petab.values import sampled_sets

    sets = sampled_sets(prepared.problem, 200, 5)
    before = len(fake_gpu.live_buffers())
    result = prepared.evaluate(sets)
    kernel = fake_gpu.objectives[-1]
    assert kernel.launched >= 3
    launches = [args for name, args, *_ in fake_gpu.launches
                if name == "sbmlgpu_petab_objective"][-kernel.launched:]
    # arguments 7..14: the tables and q, the same device buffers in every launch
    assert all(a[7:15] == launches[0][7:15] for a in launches)
    assert len(fake_gpu.live_buffers()) == before  # nothing left on the device
    cpu = objective(_yaml("Fujita_SciSignal2010"), device="cpu", options=options).evaluate(sets)
    ok = cpu.status == 0
    assert np.array_equal(result.status, cpu.status) and ok.sum() >= 100
    np.testing.assert_allclose(result.nll[ok], cpu.nll[ok], rtol=1e-12, atol=1e-9)
