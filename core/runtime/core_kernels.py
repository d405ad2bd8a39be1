"""Core's own small kernels (codegen/templates: the member-major transpose, the
column gather), compiled once per device and precision and kept for the process."""

from __future__ import annotations

import threading
import weakref

import numpy as np

from .once import OncePerKey

_lock = threading.Lock()  # held only to find a device's kernels, never over a compile
# device -> (template, kernel, precision) -> compiled kernel
_kernels: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def precision_of(dtype, what: str) -> str:
    """"double" or "float", the templates' precision for `dtype` (else ValueError)."""
    dtype = np.dtype(dtype)
    if dtype == np.float64:
        return "double"
    if dtype == np.float32:
        return "float"
    raise ValueError(f"{what}: no kernel for {dtype} (float32 or float64)")


def core_kernel(device, template: str, kernel: str, dtype, what: str):
    """`kernel` of core's template `template` for `dtype` on `device` (compiled on
    first use; threads asking at once compile it once)."""
    precision = precision_of(dtype, what)
    key = (template, kernel, precision)
    with _lock:
        compiled = _kernels.setdefault(device, OncePerKey())

    def build():
        from ..codegen.templates import CORE_PACKAGE, render  # jinja2: GPU runs only

        text = render(CORE_PACKAGE, template, precision=precision)
        stem = template.rsplit(".", 1)[0]
        return device.compile(text, name=f"{stem}_{precision}.cu").function(kernel)

    return compiled.get(key, build)
