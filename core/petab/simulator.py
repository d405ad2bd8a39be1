"""`sbmlgpu.petab.PetabSimulator`: petab's Simulator interface over sbmlgpu."""

from __future__ import annotations

from .problem import petab_v1

_Simulator = petab_v1().simulate.Simulator


class PetabSimulator(_Simulator):
    """A `petab.v1.simulate.Simulator` whose simulations come from sbmlgpu (the ode
    backend: the GPU where there is one, else its CPU path), at the problem's
    nominal parameters. petab's `simulate()` adds noise on top when asked.

    `PetabSimulator(petab_problem, working_dir=None, *, path=None, backend="ode",
    device="auto")`: `path` is the problem's YAML, from which the SBML model and
    parameter table are read (a petab.v1.Problem does not record where its files
    are); without it the model is read from the problem's own libsbml document."""

    def __init__(self, petab_problem, working_dir=None, *, path=None, backend="ode",
                 device="auto"):
        super().__init__(petab_problem, working_dir)
        self.path = path
        self.backend, self.device = backend, device

    def simulate_without_noise(self):
        from .problem import from_petab_problem, load_problem
        from .run import simulate_problem

        problem = (load_problem(self.path) if self.path is not None
                   else from_petab_problem(self.petab_problem))
        result = simulate_problem(problem, backend=self.backend, device=self.device)
        return result.simulation_df(0)
