"""pyproject.toml lists packages by hand (package-dir renames the folders): every
folder with an __init__.py must be listed, or an installed sbmlgpu would lack it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10: the tests skip themselves
    tomllib = None

ROOT = Path(__file__).resolve().parents[1]


def _packages_on_disk() -> set[str]:
    found = set()
    for top, name in (("core", "sbmlgpu"), ("plugins", "sbmlgpu.plugins")):
        for init in (ROOT / top).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / top)
            found.add(".".join([name, *rel.parts]) if rel.parts else name)
    return found


def test_every_package_is_listed_and_every_listed_package_exists():
    if tomllib is None:
        pytest.skip("tomllib needs Python 3.11")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    on_disk = _packages_on_disk()
    assert on_disk - listed == set(), "packages missing from pyproject.toml"
    assert listed - on_disk == set(), "pyproject.toml lists packages that do not exist"


def test_entry_points_name_listed_packages():
    if tomllib is None:
        pytest.skip("tomllib needs Python 3.11")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    for name, target in config["project"]["entry-points"]["sbmlgpu"].items():
        assert target.split(":")[0] in listed, name
