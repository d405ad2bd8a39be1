"""sympy -> CUDA C: printer, C-safe names, common subexpressions, cost model, templates.

Modules (import the one you need; nothing here imports PyCUDA):

- names.py          `mangle(id)` -> `s_<escaped id>`; CSE temporaries are `cse_<n>`
- printer.py        `CudaPrinter(symbols, precision).doprint(expr)`; `CodegenError`
- numpy_printer.py  the same arithmetic as Python: `NumpyPrinter` (arrays),
                    `ScalarPrinter` (floats; the CPU reference), their namespaces
- cse.py            `eliminate(exprs).render(printer)` -> (statements, outputs)
- cost.py           `count_ops(expr)`, `count_block(block)` -> `OpCount.flops()`
- templates.py      `render(package, file, **context)`, `dump_sources(sources, dir)`;
                    templates/common.cuh (real_t, helpers, Philox) is in every kernel
- philox.py         the numpy twin of the device generator
- interval_selftest.py  the op table of templates/interval.cuh (outward-rounded
                    interval arithmetic) for host and GPU tests
- compile_check.py  `nvcc_compile(source, arch)` -> cubin bytes; `CompileError`
"""
