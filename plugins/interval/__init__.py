"""The `interval` backend: parameter estimation from bounded-error data by set
inversion (SIVIA) over guaranteed interval Taylor enclosures (Sharma, NCSU thesis).

Registered through the entry point `interval = "sbmlgpu.plugins.interval"` in the
`sbmlgpu` group of pyproject.toml, exactly as a third-party backend is. README.md
beside this file describes the method and its sources.
"""

from sbmlgpu.hookspecs import hookimpl


@hookimpl
def sbmlgpu_backends():
    from .backend import IntervalBackend

    return [IntervalBackend()]
