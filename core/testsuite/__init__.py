"""SBML Test Suite runner: semantic (time-course) cases, and the stochastic (DSMTS) ones.

    sbmlgpu testsuite ../shared/sbml-test-suite/semantic --jobs 8 --json out.json
    python -m sbmlgpu.testsuite CASES_DIR --cases 1-100,250

One line per case (`NNNNN pass`, `NNNNN FAIL ...`, `NNNNN skipped: <reason>`),
then `N passed, N failed, N skipped (N refused features, N not time courses)`:
a case is skipped only when the simulator refuses a feature of its model (a typed
UnsupportedModelError) or when it is not a time course; anything else that stops
it is a FAIL. `add_arguments(parser)` and
`main_from_args(args)` are what the `sbmlgpu` CLI wires in.
"""

from .cases import Case, Settings, find_cases, parse_selection, read_settings
from .cli import add_arguments, main, main_from_args
from .compare import compare, point_ratios
from .outcome import Outcome
from .runner import RunConfig, run_case

__all__ = ["add_arguments", "main_from_args", "main", "run_case", "RunConfig", "Outcome",
           "Case", "Settings", "find_cases", "parse_selection", "read_settings", "compare",
           "point_ratios"]
