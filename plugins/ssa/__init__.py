"""The `ssa` backend: Gillespie's direct method, many realisations at once on the GPU
(one per thread), with a numpy and a compiled-host CPU path.

Registered through the entry point `ssa = "sbmlgpu.plugins.ssa"` in the `sbmlgpu`
group of pyproject.toml, exactly as a third-party backend is. README.md beside
this file describes the methods and their sources.
"""

from sbmlgpu.hookspecs import hookimpl


@hookimpl
def sbmlgpu_backends():
    from .backend import SsaBackend

    return [SsaBackend()]
