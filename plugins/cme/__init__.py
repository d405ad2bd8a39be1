"""The `cme` backend: steady state of the chemical master equation (issue 10).

The lead adds the hookimpl; the parts so far: model.py (what is solved and what is
refused), conservation.py (bounds from conservation laws), statespace.py (the
compiled depth-first enumeration), matrix.py (the CPU matrix).
"""
