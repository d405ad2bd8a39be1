"""docs/plugins.md is a complete example: its files ARE tests/thirdparty_plugin, a package
built from the page's own text installs and works, and the commands it shows print what
it says they print."""

import math
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_plugins_thirdparty import EXAMPLE, pip_install

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "plugins.md"
# a file of the package: a line "`path`:", a blank line, then a fenced block
FILE_BLOCK = re.compile(r"^`([\w./-]+)`:\n\n```\w*\n(.*?)\n```$", re.M | re.S)
CONSOLE_BLOCK = re.compile(r"^```console\n(.*?)\n```$", re.M | re.S)


def doc_files() -> dict[str, str]:
    return {path: text + "\n" for path, text in FILE_BLOCK.findall(DOC.read_text())}


def test_the_page_shows_every_file_of_the_example_package_exactly():
    shown = doc_files()
    on_disk = {str(p.relative_to(EXAMPLE)): p.read_text()
               for p in EXAMPLE.rglob("*") if p.is_file() and p.suffix in (".py", ".toml")
               and not {"build", "__pycache__"} & set(p.relative_to(EXAMPLE).parts)
               and "egg-info" not in str(p)}
    assert set(shown) == set(on_disk), "docs/plugins.md and tests/thirdparty_plugin differ"
    for path, text in shown.items():
        assert text == on_disk[path], f"{path} differs from its text in docs/plugins.md"


def console_steps() -> list[tuple[str, list[str]]]:
    """(command, expected output lines) of the page's console blocks; '...' stands for
    lines left out."""
    steps: list[tuple[str, list[str]]] = []
    for block in CONSOLE_BLOCK.findall(DOC.read_text()):
        for line in block.splitlines():
            if line.startswith("$ "):
                steps.append((line[2:], []))
            else:
                steps[-1][1].append(line)
    return steps


def test_a_package_built_from_the_page_text_runs_the_commands_shown(tmp_path):
    package = tmp_path / "from-doc" / "sbmlgpu-example-backend"
    for path, text in doc_files().items():
        (package / path).parent.mkdir(parents=True, exist_ok=True)
        (package / path).write_text(text)
    env = pip_install([package], tmp_path)
    work = tmp_path / "checkout"  # the commands run in the sbmlgpu checkout
    shutil.copytree(ROOT / "sbml_models", work / "sbml_models")
    steps = console_steps()
    assert len(steps) >= 5
    for command, expected in steps:
        argv = shlex.split(command)
        if argv[0] == "cat":
            actual = (work / argv[1]).read_text().splitlines()
        else:
            assert argv[0] == "sbmlgpu"
            done = subprocess.run([sys.executable, "-m", "sbmlgpu", *argv[1:]], env=env,
                                  cwd=work, capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, f"{command}\n{done.stderr}"
            actual = done.stdout.splitlines()
        _expect_in_order(command, expected, actual)


def _same_line(shown: str, printed: str) -> bool:
    """The line as shown, numbers equal to 1e-12 relative: the last digit of a value
    computed through LAPACK (the example's Newton steps) differs between CPUs (BLAS
    kernels chosen by instruction set), and the page is written on one of them."""
    if shown == printed:
        return True
    a, b = shown.split(","), printed.split(",")
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x == y:
            continue
        try:
            fx, fy = float(x), float(y)
        except ValueError:
            return False
        if not math.isclose(fx, fy, rel_tol=1e-12, abs_tol=1e-300):
            return False
    return True


def _expect_in_order(command: str, expected: list[str], actual: list[str]) -> None:
    """Every shown line appears, in order; '...' may stand for any lines."""
    position = 0
    gap = False
    for line in expected:
        if line == "...":
            gap = True
            continue
        if gap:
            found = [k for k in range(position, len(actual)) if _same_line(line, actual[k])]
            if not found:
                pytest.fail(f"`{command}` does not print {line!r}:\n" + "\n".join(actual))
            position = found[0] + 1
        else:
            if position >= len(actual) or not _same_line(line, actual[position]):
                pytest.fail(f"`{command}` printed\n" + "\n".join(actual)
                            + f"\nwhere the page shows {line!r} at line {position + 1}")
            position += 1
        gap = False
    if not gap and position != len(actual):
        pytest.fail(f"`{command}` printed more than the page shows:\n" + "\n".join(actual))
