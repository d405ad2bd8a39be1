"""Shared fixtures: backends registered for one test in place of the installed plugins;
a fake GPU device (tests/fakes.py); the PyCUDA driver over a stand-in for pycuda
(tests/fake_pycuda.py); the real GPUs for `pytest -m gpu`."""

import pytest

from sbmlgpu import plugin_manager
from sbmlgpu.combine.libraries import preload
from sbmlgpu.hookspecs import hookimpl

from . import fakes
from .fake_pycuda import make_fake_cuda

preload()  # libsedml before any test module's `import libsbml` (see its docstring)


@pytest.fixture
def use_backends(monkeypatch):
    """`use_backends(*backends, installed=False)`: from now on in this test, sbmlgpu's
    plugin manager provides these backends (and the installed plugins as well when
    `installed`); returns that manager, for registering more."""
    def use(*backends, installed: bool = False):
        class Plugin:
            @hookimpl
            def sbmlgpu_backends(self):
                return list(backends)

        pm = plugin_manager.new_manager(entry_points=installed)
        pm.register(Plugin(), name="test-backends")
        monkeypatch.setattr(plugin_manager, "manager", lambda: pm)
        return pm
    return use


@pytest.fixture
def fake_device():
    """A fresh fakes.FakeDevice (index 0, fakes.PROPERTIES, nothing to compile)."""
    return fakes.FakeDevice()


@pytest.fixture
def driver(monkeypatch):
    """sbmlgpu's PyCudaDriver over fake_pycuda's stand-in (two devices), compiling
    through a stand-in for the on-disk cache (no nvcc)."""
    from sbmlgpu.runtime import pycuda_driver

    cuda = make_fake_cuda()
    # compiling goes through the real cache API, with a stand-in compiler
    from sbmlgpu.runtime import cache as cache_module

    class FakeCache:
        def compile(self, source, arch, options=(), name="kernel"):
            assert arch == "sm_90"
            return b"\x7fELF" + source.encode()

    monkeypatch.setattr(pycuda_driver, "default_cache", lambda: FakeCache())
    assert cache_module  # the real module stays importable
    return pycuda_driver.PyCudaDriver(cuda)


@pytest.fixture(scope="module")
def gpu_devices():
    """The GPUs the runtime finds, probed afresh for each test module (a test before may
    have left the runtime's probe result faked); skips without PyCUDA or a GPU."""
    pytest.importorskip("pycuda.driver", reason="PyCUDA is not installed")
    from sbmlgpu import runtime

    runtime.reset()
    devices = runtime.get_devices()
    if not devices:
        pytest.skip(f"no GPU: {runtime.no_gpu_reason()}")
    return devices


@pytest.fixture(scope="module")
def gpu_device(gpu_devices):
    """The first GPU (see gpu_devices)."""
    return gpu_devices[0]
