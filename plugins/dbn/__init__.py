"""The `dbn` backend: dynamic Bayesian network approximation of an ODE model from
sampled trajectories (Liu et al. 2009), counted on the GPU (Hagiescu et al. 2013).

Registered through the entry point `dbn = "sbmlgpu.plugins.dbn"` in the `sbmlgpu`
group of pyproject.toml, exactly as a third-party backend is. README.md beside
this file describes the method and its sources.
"""

from sbmlgpu.hookspecs import hookimpl


@hookimpl
def sbmlgpu_backends():
    from .backend import DbnBackend

    return [DbnBackend()]
