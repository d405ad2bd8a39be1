"""Where the shared data are (the SBML Test Suite, real models, anchors), decided once,
when the tests are collected, and how a test that needs them skips without them.

The folder is $SBMLGPU_SHARED when that is set (even if it does not exist: then
the data count as absent), else ../shared beside the checkout, else ./shared inside
it (how a copy of the tree carries the data to the GPU machine). Benchmarks find it
here too (benchmarks/*.py put the checkout on sys.path).

A test that needs a part of it takes that part's marker (`needs_semantic`, ...) and
is skipped, with one reason, when the part is absent; a test parametrized over the
data takes `parameters(...)`. Paths are Paths whether or not they exist, so that
collection-time code may look inside them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]  # the checkout
ENV = "SBMLGPU_SHARED"


def candidates(root: Path = ROOT, environ=os.environ) -> list[Path]:
    """Where the shared data may be, in order: $SBMLGPU_SHARED alone when it is set."""
    if environ.get(ENV):
        return [Path(environ[ENV]).expanduser()]
    return [root.parent / "shared", root / "shared"]


def locate(root: Path = ROOT, environ=os.environ) -> Path | None:
    """The shared-data folder, or None where there is none."""
    return next((p for p in candidates(root, environ) if p.is_dir()), None)


FOUND = locate()
SHARED = FOUND if FOUND is not None else candidates()[0]  # (for paths that do not exist)
SEMANTIC = SHARED / "sbml-test-suite" / "semantic"  # the semantic SBML Test Suite
STOCHASTIC = SHARED / "sbml-test-suite" / "stochastic"  # DSMTS
MODELS = SHARED / "models"  # petab-benchmark/, biomodels/
ANCHORS = SHARED / "anchors"

ABSENT = (f"no shared test data: ${ENV} is {os.environ[ENV]!r}, which is not a folder"
          if os.environ.get(ENV) else
          "no shared test data: neither " + " nor ".join(map(str, candidates()))
          + f" is a folder (or set ${ENV})")


def missing(path: Path, what: str) -> str | None:
    """Why a test needing `path` (`what` it holds) cannot run; None when it can."""
    if FOUND is None:
        return ABSENT  # one reason for every part, as it is the whole folder that is missing
    return None if path.exists() else f"{what} not found at {path}"


def needs(path: Path, what: str) -> pytest.MarkDecorator:
    """A marker that skips a test when `path` is absent."""
    reason = missing(path, what)
    return pytest.mark.skipif(reason is not None, reason=reason or "")


needs_semantic = needs(SEMANTIC, "the semantic SBML Test Suite")
needs_stochastic = needs(STOCHASTIC, "the stochastic SBML Test Suite (DSMTS)")
needs_models = needs(MODELS, "the real models")


def parameters(items, path: Path, what: str) -> list:
    """Parameters for a test parametrized over shared data found at collection:
    `items`, or where there are none one parameter that skips, saying why (rather
    than pytest's empty-parameter skip, whose reason says nothing of the data)."""
    items = list(items)
    if items:
        return items
    reason = missing(path, what) or f"none of {what} under {path}"
    return [pytest.param(None, marks=pytest.mark.skip(reason=reason), id="absent")]
