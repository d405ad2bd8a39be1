"""PEtab problems (`sbmlgpu petab`, `sbmlgpu.petab.simulate_problem`; docs/petab.md).

Needs the petab package (`pip install 'sbmlgpu[petab]'`), imported only when a
problem is read, so that `import sbmlgpu` stays fast.
"""

from __future__ import annotations

from .problem import PetabProblem, load_problem
from .run import PetabResult, simulate_problem


def __getattr__(name: str):
    # PetabSimulator subclasses petab's Simulator: defined on first use, so that the
    # petab package is imported only by those who ask for it
    if name == "PetabSimulator":
        from .simulator import PetabSimulator

        return PetabSimulator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["simulate_problem", "load_problem", "PetabProblem", "PetabResult",
           "PetabSimulator"]
