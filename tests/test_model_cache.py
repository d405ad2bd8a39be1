"""The compiled-model cache (sbmlgpu.model_cache, plugins/ode/warm.py): a warm run
gives the cold run's numbers without sympy; anything that changes the result misses;
a damaged entry is rebuilt; the cache can be turned off. And in-process: a loaded
model compiles once and checks its method once per parameter values."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sbmlgpu import api, model_cache
from sbmlgpu.plugins.ode import stiffness
from sbmlgpu.plugins.ode.backend import OdeBackend

MODEL = Path(__file__).resolve().parent.parent / "sbml_models" / "lotka_volterra.xml"


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory):
    # one folder for the module: the host builds are compiled once, not per test
    return tmp_path_factory.mktemp("sbmlgpu-cache")


@pytest.fixture
def cache(cache_root, monkeypatch):
    monkeypatch.setenv("SBMLGPU_CACHE_DIR", str(cache_root))
    monkeypatch.delenv(model_cache.ENABLE_ENV, raising=False)
    shutil.rmtree(cache_root / "models", ignore_errors=True)
    return cache_root / "models"


def simulate(model, cache: bool = True, outputs=None, options=None, **times):
    task = api.time_course(**(times or {"end": 10.0, "points": 11}), outputs=outputs,
                           progress=False)
    return api.execute(model, task, options=options, device="cpu", cache=cache).result


def entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def no_compile(monkeypatch):
    """Make a cold run impossible: a run that succeeds came from the cache."""
    def refuse(*args, **kwargs):
        raise AssertionError("compiled the model: the cache was not used")
    monkeypatch.setattr(OdeBackend, "compile", refuse)


def test_warm_run_gives_the_cold_numbers_without_compiling(cache, monkeypatch):
    cold = simulate(str(MODEL))
    assert len(entries(cache)) == 1
    no_compile(monkeypatch)
    warm = simulate(str(MODEL))
    np.testing.assert_array_equal(warm.data, cold.data)
    assert warm.ids == cold.ids
    assert warm.metadata["model"] == cold.metadata["model"]
    assert warm.metadata["method"] == cold.metadata["method"]
    # more output times over the same span are an input of the run, not of the kernel
    assert simulate(str(MODEL), end=10.0, points=21).data.shape[1] == 21
    # another span is an input of the method check (--method auto): checked cold
    with pytest.raises(AssertionError, match="cache was not used"):
        simulate(str(MODEL), end=5.0, points=6)


def test_warm_cli_run_imports_neither_sympy_nor_libsbml(cache, tmp_path):
    env = {**os.environ, "SBMLGPU_CACHE_DIR": str(cache.parent)}
    argv = ["run", str(MODEL), "--end", "10", "--points", "11", "--cpu", "--no-progress"]
    probe = ("import sys, json\nfrom sbmlgpu import cli\ncode = cli.main({argv!r})\n"
             "print(json.dumps([code, sorted(m for m in ('sympy', 'libsbml', 'scipy') "
             "if m in sys.modules)]))")
    results = []
    for name in ("cold", "warm"):
        done = subprocess.run([sys.executable, "-c", probe.format(
            argv=argv + ["-o", str(tmp_path / name)])], env=env, capture_output=True,
            text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert results[0] == [0, ["libsbml", "sympy"]] or "sympy" in results[0][1]
    assert results[1] == [0, []]
    assert (tmp_path / "cold" / "lotka_volterra.csv").read_text() == \
        (tmp_path / "warm" / "lotka_volterra.csv").read_text()


def test_a_changed_file_misses(cache, tmp_path):
    model = tmp_path / "lv.xml"
    shutil.copy(MODEL, model)
    before = simulate(str(model))
    model.write_text(MODEL.read_text().replace('id="p1" value="1"', 'id="p1" value="1.5"'))
    after = simulate(str(model))
    assert len(entries(cache)) == 2
    assert not np.array_equal(before.data, after.data)
    np.testing.assert_array_equal(after.data, simulate(str(model), cache=False).data)


def test_a_changed_option_misses(cache, monkeypatch):
    default = simulate(str(MODEL))
    rk4 = simulate(str(MODEL), options={"method": "rk4", "dt": 0.01})
    assert len(entries(cache)) == 2
    assert rk4.metadata["method"] == "rk4" and default.metadata["method"] != "rk4"
    no_compile(monkeypatch)  # both are cached now, each under its own key
    assert simulate(str(MODEL), options={"method": "rk4", "dt": 0.01}).metadata["method"] == "rk4"
    with pytest.raises(AssertionError, match="cache was not used"):
        simulate(str(MODEL), options={"method": "rk4", "dt": 0.02})


def test_the_key_follows_compiler_and_version(cache, monkeypatch):
    def key():
        return model_cache.key(MODEL, kind="time-course", backend=None, options=None,
                               device="cpu")
    first = key()
    assert key() == first
    monkeypatch.setenv("SBMLGPU_EXTRA_CXXFLAGS", "-mfma")
    assert key() != first
    monkeypatch.delenv("SBMLGPU_EXTRA_CXXFLAGS")
    monkeypatch.setattr("sbmlgpu.__version__", "0.0.0-other")
    assert key() != first


@pytest.mark.parametrize("part", ["templates/driver.cuh", "codegen.py"])
def test_the_key_follows_the_kernel_templates_and_generators(cache, part):
    """An entry holds generated kernel text: a template or a code generator changed in
    place (an update from git, same version) must miss."""
    import sbmlgpu.ode

    template = Path(sbmlgpu.ode.__path__[0]) / part
    before = template.stat()

    def key():
        model_cache._templates.cache_clear()
        return model_cache.key(MODEL, kind="time-course", backend=None, options=None,
                               device="cpu")
    first = key()
    try:
        os.utime(template, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
        assert key() != first
    finally:
        os.utime(template, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert key() == first


def test_new_outputs_run_cold_and_join_the_entry(cache, monkeypatch):
    both = simulate(str(MODEL))
    one = simulate(str(MODEL), outputs=["prey"] if "prey" in both.ids else [both.ids[0]])
    [entry] = entries(cache)
    assert len(json.loads(entry.read_text())["program"]["runs"]) == 2
    no_compile(monkeypatch)
    again = simulate(str(MODEL), outputs=list(one.ids))
    np.testing.assert_array_equal(again.data, one.data)
    np.testing.assert_array_equal(simulate(str(MODEL)).data, both.data)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "wrong state"])
def test_a_damaged_entry_is_rebuilt(cache, damage):
    cold = simulate(str(MODEL))
    [entry] = entries(cache)
    text = entry.read_text()
    if damage == "garbage":
        entry.write_bytes(b"\x00\xff not json")
    elif damage == "truncated":
        entry.write_text(text[: len(text) // 2])
    else:
        data = json.loads(text)
        data["program"]["runs"][0]["source"] = {"name": "x"}  # not a kernel record
        entry.write_text(json.dumps(data))
    rebuilt = simulate(str(MODEL))
    np.testing.assert_array_equal(rebuilt.data, cold.data)
    data = json.loads(entry.read_text())
    assert data["format"] == model_cache.FORMAT and "text" in data["program"]["runs"][0]["source"]


def test_the_cache_can_be_turned_off(cache, monkeypatch, tmp_path):
    simulate(str(MODEL), cache=False)
    assert entries(cache) == []
    monkeypatch.setenv(model_cache.ENABLE_ENV, "0")
    simulate(str(MODEL))
    assert entries(cache) == []
    monkeypatch.delenv(model_cache.ENABLE_ENV)
    from sbmlgpu import cli

    assert cli.main(["run", str(MODEL), "--end", "10", "--cpu", "--no-progress",
                     "--no-cache", "-o", str(tmp_path)]) == 0
    assert entries(cache) == []


def test_sbml_text_and_networks_do_not_use_the_file_cache(cache):
    simulate(MODEL.read_text())
    assert entries(cache) == []
    assert model_cache.model_file(MODEL.read_text()) is None
    assert model_cache.model_file(MODEL) == MODEL


def test_a_loaded_model_compiles_and_checks_its_method_once(cache, monkeypatch):
    import sbmlgpu

    network = sbmlgpu.load(str(MODEL))
    compiled, checked = [], []
    real_compile, real_choose = OdeBackend.compile, stiffness.choose_method
    monkeypatch.setattr(OdeBackend, "compile",
                        lambda self, *a, **k: compiled.append(1) or real_compile(self, *a, **k))
    monkeypatch.setattr(stiffness, "choose_method",
                        lambda *a, **k: checked.append(1) or real_choose(*a, **k))
    first = sbmlgpu.run(network, end=10, points=11, device="cpu", progress=False)
    second = sbmlgpu.run(network, end=10, points=11, device="cpu", progress=False)
    np.testing.assert_array_equal(first.data, second.data)
    assert (len(compiled), len(checked)) == (1, 1)
    # other parameter values: the method is checked again, the program is the same
    sbmlgpu.run(network, end=10, points=11, device="cpu", progress=False,
                parameters={"p1": [1.0, 1.2]})
    sbmlgpu.run(network, end=10, points=11, device="cpu", progress=False,
                parameters={"p1": [1.0, 1.3]})
    assert (len(compiled), len(checked)) == (1, 3)
    assert entries(cache) == []  # a Network is not a file: nothing written


def test_a_network_pass_turns_the_cache_off(cache):
    from sbmlgpu import plugin_manager
    from sbmlgpu.hookspecs import hookimpl

    class Pass:
        calls = 0

        @hookimpl
        def sbmlgpu_transform_network(self, network):
            Pass.calls += 1  # a pass may read more than the file: it must run every time

    pm = plugin_manager.manager()
    plugin = Pass()
    pm.register(plugin, name="test-pass")
    try:
        simulate(str(MODEL))
        simulate(str(MODEL))
    finally:
        pm.unregister(plugin)
    assert Pass.calls == 2
    assert entries(cache) == []


def test_a_loaded_model_builds_again_under_other_compiler_flags(cache, monkeypatch):
    import sbmlgpu

    network = sbmlgpu.load(str(MODEL))
    compiled = []
    real_compile = OdeBackend.compile
    monkeypatch.setattr(OdeBackend, "compile",
                        lambda self, *a, **k: compiled.append(1) or real_compile(self, *a, **k))
    sbmlgpu.run(network, end=10, points=11, device="cpu", progress=False)
    monkeypatch.setenv("SBMLGPU_EXTRA_CXXFLAGS", "-O1")  # read at every build
    sbmlgpu.run(network, end=10, points=11, device="cpu", progress=False)
    assert len(compiled) == 2
