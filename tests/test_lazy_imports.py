"""`import sbmlgpu`, `sbmlgpu --help` and `sbmlgpu run --help` import no heavy package
(issue 13, fixed cost: `import sbmlgpu` took 3.6 s on the GPU machine). Each check runs
in a fresh interpreter, since this test process has imported everything already."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: packages that only some commands need; none may load before it is used
HEAVY = ("sympy", "scipy", "matplotlib", "h5py", "pycuda", "pandas", "petab", "libsedml",
         "libsbml", "libcombine", "cupy", "jax")

PROBE = """
import json, sys
{code}
print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)))
"""


def imported_heavy(code: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", PROBE.format(code=code, heavy=HEAVY)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def help_of(argv: list[str]) -> str:
    return (f"import contextlib, io\nfrom sbmlgpu import cli\n"
            f"with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    assert cli.main({argv!r}) == 0\n")


@pytest.mark.parametrize("code", [
    "import sbmlgpu",
    "import sbmlgpu; sbmlgpu.OptionError; sbmlgpu.__version__",
    help_of(["--help"]),
    help_of(["run", "--help"]),
    help_of(["backends"]),
], ids=["import", "errors", "help", "run-help", "backends"])
def test_no_heavy_import(code):
    assert imported_heavy(code) == []


def test_public_names_still_resolve():
    # the lazy names are the same objects as in their modules, and listed by dir()
    import sbmlgpu
    from sbmlgpu import api, ir, tasks

    assert sbmlgpu.run is api.run
    assert sbmlgpu.Network is ir.Network
    assert sbmlgpu.TimeCourse is tasks.TimeCourse
    assert callable(sbmlgpu.steady_state) and sbmlgpu.steady_state.__name__ == "steady_state"
    assert {"run", "Network", "dbn"} <= set(dir(sbmlgpu))
    with pytest.raises(AttributeError):
        sbmlgpu.no_such_name  # noqa: B018


def test_using_a_name_imports_what_it_needs():
    # the probe can see a heavy import at all: Network is the IR, which is sympy's
    assert "sympy" in imported_heavy("import sbmlgpu; sbmlgpu.Network")
