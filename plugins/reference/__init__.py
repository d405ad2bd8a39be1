"""The `reference` backend: the scipy CPU reference solver, one trajectory per parameter set.

Registered through the entry point `reference = "sbmlgpu.plugins.reference"` in
the `sbmlgpu` group of pyproject.toml, exactly as a third-party backend is.
"""

from sbmlgpu.hookspecs import hookimpl


@hookimpl
def sbmlgpu_backends():
    from .backend import ReferenceBackend

    return [ReferenceBackend()]
