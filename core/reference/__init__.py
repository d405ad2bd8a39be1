"""CPU reference solvers: the oracles for every GPU backend and the fallback without a GPU.

    traj = sbmlgpu.reference.simulate(network, np.linspace(0, 10, 101))
    traj.evaluate(["S1", "S2"], kind="amount")

`compile_model(network)` once, then `simulate(compiled, ...)` for many parameter
sets. `unsupported(network)` lists what it refuses (empty: it can simulate it).
"""

from .model import CompiledModel, compile_model
from .timeloop import METHODS, simulate
from .support import unsupported
from .trajectory import Trajectory

__all__ = ["simulate", "compile_model", "CompiledModel", "Trajectory", "unsupported", "METHODS"]
