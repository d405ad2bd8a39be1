"""The names the `ssa` options choose among, apart from the modules that use them:
options.py is imported when the plugin registers, codegen.py and model.py import
sympy, and registering a backend must not (issue 13: fixed cost of a run)."""

LAYOUTS = ("register", "fat", "thin")
UPDATES = ("full", "sparse")
METHODS = ("direct", "optimized")
RATE_SPECIES = ("sbml", "amount")
