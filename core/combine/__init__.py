"""COMBINE archives (OMEX) and SED-ML: `sbmlgpu omex -i ARCHIVE.omex -o OUTDIR`.

archive.py opens the archive and lists its SED-ML files; libraries.py imports
libcombine/libsedml lazily; xpath.py reads SED-ML targets; models.py resolves model
sources and applies model changes; kisao.py maps algorithms to backends; mathexpr.py
evaluates SED-ML math; ranges.py and tasks.py run tasks (a repeated task as one
ensemble); outputs.py writes reports (HDF5, CSV) and plots; runner.py ties them
together (`run_omex`). docs/combine.md says what is supported.
"""

from __future__ import annotations


def run_omex(archive, outdir, **kwargs):
    """Run every SED-ML file of a COMBINE archive; see sbmlgpu.combine.runner.run_omex."""
    from .runner import run_omex as _run

    return _run(archive, outdir, **kwargs)


__all__ = ["run_omex"]
