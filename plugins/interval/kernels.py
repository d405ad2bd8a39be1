"""The interval kernels' sources for one model and one set of interval inputs: the
generated Taylor, initial-value and output functions in kernels/model.cuh (which
includes validated.cuh), included by kernels/interval.cu (one thread per box, the
multi-kernel scheme and the host build) and kernels/persistent.cu (the whole SIVIA
in one persistent kernel)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from sbmlgpu.codegen.names import mangle
from sbmlgpu.codegen.taylor import TaylorError, interval_values, taylor_function
from sbmlgpu.codegen.templates import render
from sbmlgpu.ir import TIME

from . import verdicts
from .model import IntervalModel, unsupported_expression

PACKAGE = "sbmlgpu.plugins.interval"
KERNEL = "iv_check"
PERSISTENT_KERNEL = "iv_persistent"


@dataclass(frozen=True)
class IntervalSource:
    name: str  # file name (model, order, a hash of the text)
    text: str
    kernel: str  # the GPU entry point
    host_entry: str  # the host build's entry point
    series_nodes: int  # coefficient arrays of the variational function (local memory)
    n: int  # states (the record's width)


def interval_source(model: IntervalModel, order: int) -> IntervalSource:
    """The multi-kernel scheme's source (kernels/interval.cu): one thread per box, and
    the host build's entry point (the CPU path)."""
    return _source(model, order, "interval.cu", "interval", KERNEL, "iv_check_host")


def persistent_source(model: IntervalModel, order: int) -> IntervalSource:
    """The persistent kernel's source (kernels/persistent.cu): the whole SIVIA on the
    device over a box queue. GPU only (its host_entry is empty)."""
    return _source(model, order, "persistent.cu", "persistent", PERSISTENT_KERNEL, "")


def _source(model: IntervalModel, order: int, template: str, prefix: str, kernel: str,
            host_entry: str) -> IntervalSource:
    ode = model.ode
    x_function, xv_function, initial, outputs = _functions(model)
    ids = [f"c[{j}] = {pid}" + (" (interval)" if j in model.varied_index else "")
           for j, pid in enumerate(ode.p_ids)]
    ids += [f"x[{i}] = {sid}" for i, sid in enumerate(ode.state_ids)]
    ids += [f"y[{k}] = {mid}" for k, mid in enumerate(model.measured)]
    text = render(PACKAGE, template, precision="double", model=ode.network.id or "model",
                  n=model.n, nq=len(model.varied), nu=len(model.unknown), nc=len(ode.p),
                  ny=len(model.measured), order=order, varied=list(model.varied_index),
                  verdicts=verdicts.CODES, ids=[i.replace("*/", "* /") for i in ids],
                  functions="\n".join([x_function.text, xv_function.text, initial, outputs]))
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    stem = mangle(ode.network.id or "model")[2:]
    return IntervalSource(f"{prefix}_{stem}_order{order}_{digest}.cu", text, kernel,
                          host_entry, xv_function.series_nodes, model.n)


def _functions(model: IntervalModel):
    """The generated Taylor, variational, initial-value and output functions."""
    ode = model.ode
    constants = model.constants
    try:
        x_function = taylor_function("iv_taylor_x", model.rhs, ode.x, constants, TIME,
                                     ode.state_ids, where="rate")
        xv_function = taylor_function("iv_taylor_xv", model.variational,
                                      model.variational_states, constants, TIME,
                                      model.variational_labels, where="variational rate")
        states = {x: f"x[{i}]" for i, x in enumerate(ode.x)}
        initial = interval_values("iv_initial", model.initial_values,
                                  {**constants, TIME: "t"}, ode.state_ids, "initial value")
        outputs = interval_values("iv_outputs", model.outputs,
                                  {**constants, **states, TIME: "t"}, model.measured,
                                  "measured value")
    except TaylorError as e:
        raise unsupported_expression(e, model) from None
    return x_function, xv_function, initial, outputs
