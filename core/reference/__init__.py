"""CPU reference solvers: the oracles for every GPU backend and the fallback without a GPU."""
