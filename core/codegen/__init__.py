"""sympy -> CUDA C: printer, C-safe names, common subexpressions, cost model, templates."""
