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


def _folder(package: str) -> Path:
    top, name = (("plugins", "sbmlgpu.plugins") if package.startswith("sbmlgpu.plugins")
                 else ("core", "sbmlgpu"))
    return ROOT / top / Path(*package[len(name):].strip(".").split(".")) \
        if package != name else ROOT / top


def test_every_package_is_listed_and_every_listed_package_exists():
    if tomllib is None:
        pytest.skip("tomllib needs Python 3.11")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    data = config["tool"]["setuptools"]["package-data"]
    on_disk = _packages_on_disk()
    assert on_disk - listed == set(), "packages missing from pyproject.toml"
    # the rest must be template folders: data files only, all of them package-data
    for package in listed - on_disk:
        folder = _folder(package)
        assert folder.is_dir(), f"pyproject.toml lists {package}, which does not exist"
        files = {p.name for p in folder.iterdir() if p.is_file()}
        covered = {p.name for pattern in data.get(package, ()) for p in folder.glob(pattern)}
        assert files and files == covered, f"{package}: files not in its package-data: " \
                                           f"{sorted(files - covered)}"
    # kernel templates: CUDA (.cu, .cuh) and host C++ (.cpp, e.g. the CME enumerator)
    for folder in {p.parent for top in ("core", "plugins") for pattern in ("*.cu*", "*.cpp")
                   for p in (ROOT / top).rglob(pattern)}:
        assert any(_folder(pkg) == folder for pkg in listed), f"{folder} is not packaged"


def test_entry_points_name_listed_packages():
    if tomllib is None:
        pytest.skip("tomllib needs Python 3.11")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    for name, target in config["project"]["entry-points"]["sbmlgpu"].items():
        assert target.split(":")[0] in listed, name
