"""PEtab problems (`sbmlgpu petab`, `sbmlgpu.petab.simulate_problem`, and
`sbmlgpu.petab.objective` for repeated evaluation; docs/petab.md).

Needs the petab package (`pip install 'sbmlgpu[petab]'`), imported only when a
problem is read. The names below are loaded on first use, so that the command line
(which registers `sbmlgpu petab` from .command) and `import sbmlgpu` stay fast.
"""

from __future__ import annotations

import importlib

_WHERE = {"simulate_problem": ".run", "PetabResult": ".result", "load_problem": ".problem",
          "PetabProblem": ".problem", "PetabSimulator": ".simulator",
          "objective": ".prepared", "PreparedObjective": ".prepared"}


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = list(_WHERE)
