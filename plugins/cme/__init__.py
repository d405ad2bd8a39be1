"""The `cme` backend: steady state of the chemical master equation on the GPU
(Maggioni, Berger-Wolf and Liang 2013), with a scipy.sparse CPU path.

Registered through the entry point `cme = "sbmlgpu.plugins.cme"` in the `sbmlgpu`
group of pyproject.toml, exactly as a third-party backend is. README.md beside
this file describes the method and its sources.
"""

from sbmlgpu.hookspecs import hookimpl


@hookimpl
def sbmlgpu_backends():
    from .backend import CmeBackend

    return [CmeBackend()]
