"""Derived forms of a Network that backends consume: the ODE view and the stochastic view."""

from .ode import AMOUNT, VALUE, OdeEvent, OdeSystem, ode_system
from .stochastic import StochasticSystem, stochastic_system

__all__ = ["ode_system", "OdeSystem", "OdeEvent", "stochastic_system", "StochasticSystem",
           "AMOUNT", "VALUE"]
