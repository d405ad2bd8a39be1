"""The `ode` backend: ODE ensembles on the GPU (one thread per trajectory).

Registered through the entry point `ode = "sbmlgpu.plugins.ode"` in the `sbmlgpu`
group of pyproject.toml, exactly as a third-party backend is. See README.md.
"""

from sbmlgpu.hookspecs import hookimpl


@hookimpl
def sbmlgpu_backends():
    from .backend import OdeBackend

    return [OdeBackend()]
