"""Compile the likely kernel while `--method auto`'s stiffness check runs.

The check (stiffness.py) integrates a few members with the CPU reference, which takes
from a tenth of a second to seconds; nvcc or g++ on the kernel takes as long or
longer, and both compilers run as processes of their own. So before the check, a
thread generates the kernel for the method the check most often picks (rodas4: every
PEtab model measured so far is stiff, and it is the fallback when the check cannot
decide) and compiles it into the caches the run then reads: the cubin cache for the
GPU (sbmlgpu.runtime.cache) and the host library cache for the native CPU path
(sbmlgpu.runtime.host); a large kernel's nvcc build runs as several units at once
(sbmlgpu.runtime.parallel_build). When the check picks that method the run waits for the
thread (`join`) and finds the build done; when it picks another the thread is left
to finish in the background (its build serves a later run).

Only for models over codegen.INLINE_MODEL_MAX states (`worth_it`): there the build
takes long; a small model's takes a second or two, and when the check picks dopri5
the build ahead is wasted work (the SBML test suite on the CPU would build two
kernels per case).

The thread only fills caches and the program's engine table; a failure in it is
logged and left for the run itself to meet and report.
"""

from __future__ import annotations

import logging
import threading

log = logging.getLogger("sbmlgpu.ode")

#: the method built while the check runs
LIKELY_METHOD = "rodas4"


def worth_it(model) -> bool:
    from sbmlgpu.ode.codegen import INLINE_MODEL_MAX

    return model.n_states > INLINE_MODEL_MAX


class Prefetch:
    """A thread building `program`'s kernel of `model` for `method`."""

    def __init__(self, program, model, method: str = LIKELY_METHOD):
        self.method = method
        self._thread = threading.Thread(target=self._build, args=(program, model),
                                        name=f"sbmlgpu-ode-prefetch-{method}", daemon=True)
        self._thread.start()

    def _build(self, program, model) -> None:
        try:
            from sbmlgpu.ode.engines import GpuEngine
            from sbmlgpu.runtime.cache import default_cache

            _, engine = program._engine(model, self.method)  # host build included
            device = program.device
            if isinstance(engine, GpuEngine) and device is not None:
                # the cubin into the on-disk cache only: loading it needs the device's
                # context, which belongs to the run's thread
                default_cache().compile(engine.source.text, arch=device.properties.arch,
                                        options=engine.options, name=engine.source.name)
        except Exception as exc:  # noqa: BLE001 - the run builds (and reports) it again
            log.debug("building the %s kernel ahead of the method check failed: %s",
                      self.method, exc)

    def join(self, chosen: str) -> None:
        """Wait for the build when the check chose its method (else let it run on)."""
        if chosen == self.method:
            self._thread.join()
