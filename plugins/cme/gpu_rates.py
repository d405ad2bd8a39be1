"""The GPU side of a CME program: the propensities of every reaction at every state
from the generated kernel (kernels/propensities.cu, one thread per state), then the
GPU engine over them — the propensities never leave the device.
"""

from __future__ import annotations

import numpy as np

from sbmlgpu.codegen.templates import render
from sbmlgpu.runtime.base import Buffer

from .gpu_engine import GpuEngine, bytes_needed, check_fits
from .options import CmeOptions

BLOCK = 256
KERNEL = "cme_propensity_kernel"


def propensity_kernel_source(model) -> str:
    return render("sbmlgpu.plugins.cme", "propensities.cu",
                  function=model.propensity_function(), kernel=KERNEL)


def propensities_device(model, space, device) -> tuple[Buffer, str]:
    """(prop, source): an (R, n) reaction-major double Buffer on `device` and the
    kernel text that computed it (for --keep-source)."""
    source = propensity_kernel_source(model)
    module = device.compile(source, options=("-O3",), name=f"cme_propensities_{model.model_id}")
    n, r = space.n, len(space.reaction_ids)
    prop = device.alloc(8 * max(r * n, 1))
    states = device.to_device(np.ascontiguousarray(space.states, dtype=np.int32))
    try:
        if n:
            module.function(KERNEL).launch((-(-n // BLOCK),), (BLOCK,),
                                           [states, np.int64(n), prop])
    finally:
        states.free()
    return prop, source


def build_engine(model, space, options: CmeOptions, device):
    """(engine, info) for CmeProgram: the propensities on the device, the engine in
    the chosen format over them. The memory check comes first: a space that will not
    fit is an OptionError before anything is allocated on the device."""
    nnz = int(np.count_nonzero(space.sources >= 0))
    check_fits(bytes_needed(options.matrix_format, space.n, len(space.reaction_ids), nnz,
                            options.solver, idr_shadow=options.idr_shadow),
               device.free_memory(), f"the CME generator of {space.n} states "
               f"({options.matrix_format}, solver {options.solver})", device)
    prop, source = propensities_device(model, space, device)
    try:
        engine = GpuEngine(options.matrix_format, space.sources, space.targets, prop,
                           device=device, aggregate=options.aggregate,
                           coarsest=options.coarsest, solver=options.solver,
                           idr_shadow=options.idr_shadow, model_id=model.model_id)
    except BaseException:
        prop.free()
        raise
    fmt = engine.format
    info = {"engine": f"gpu ({device.properties.name})", "format": fmt.name,
            "nnz": int(fmt.nnz), "stored": int(fmt.stored),
            "padding_efficiency": float(fmt.padding_efficiency),
            "bytes_per_sweep": int(fmt.bytes_per_sweep),
            "sources": {"propensities_kernel": source, "formats": engine.source}}
    return engine, info
