"""Shared fixtures: backends registered for one test in place of the installed plugins."""

import pytest

from sbmlgpu import plugin_manager
from sbmlgpu.hookspecs import hookimpl


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
