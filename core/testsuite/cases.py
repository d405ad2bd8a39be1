"""SBML Test Suite cases on disk: finding them, choosing them, reading their settings.

A case is a folder NNNNN holding NNNNN-settings.txt, NNNNN-model.m (the case's
description, with `testType:`), one or more NNNNN-sbml-lXvY.xml files and the
expected results (semantic: NNNNN-results.csv; stochastic (DSMTS): mean and sd
columns, with `output:`, `meanRange:` and `sdRange:` in the settings).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import OptionError

SEMANTIC = "semantic"
STOCHASTIC = "stochastic"


@dataclass(frozen=True)
class Settings:
    start: float
    duration: float
    steps: int
    variables: tuple[str, ...]
    absolute: float | None
    relative: float | None
    amount: tuple[str, ...]
    concentration: tuple[str, ...]
    output: tuple[str, ...] = ()  # stochastic: columns such as X-mean, X-sd
    mean_range: tuple[float, float] | None = None
    sd_range: tuple[float, float] | None = None
    raw: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def kind(self) -> str:
        return STOCHASTIC if (self.output or self.mean_range) else SEMANTIC

    def output_kind(self, variable: str) -> str:
        """How the case reports a variable: 'amount', 'concentration' or 'value'."""
        if variable in self.amount:
            return "amount"
        if variable in self.concentration:
            return "concentration"
        return "value"

    def times(self) -> np.ndarray:
        return np.linspace(self.start, self.start + self.duration, self.steps + 1)


class CaseError(Exception):
    """A case folder that cannot be read (missing or malformed files)."""


def _list(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def _number(value: str, key: str, path: Path) -> float | None:
    value = value.strip()
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        raise CaseError(f"{path}: '{key}: {value}' is not a number") from None


def _range(value: str, key: str, path: Path) -> tuple[float, float] | None:
    value = value.strip()
    if not value:
        return None
    m = re.fullmatch(r"\(\s*([-+0-9.eE]+)\s*,\s*([-+0-9.eE]+)\s*\)", value)
    if not m:
        raise CaseError(f"{path}: '{key}: {value}' is not a range like (-3, 3)")
    return float(m.group(1)), float(m.group(2))


def read_settings(path: Path) -> Settings:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise CaseError(f"{path}: {exc.strerror}") from None
    raw = {}
    for line in text.splitlines():
        if ":" in line:
            key, value = line.split(":", 1)
            raw[key.strip().lower()] = value.strip()
    for key in ("start", "duration", "steps", "variables"):
        if key not in raw:
            raise CaseError(f"{path}: no '{key}:' line")
    steps = _number(raw["steps"], "steps", path)
    if steps is None or steps != int(steps) or steps < 1:
        raise CaseError(f"{path}: 'steps: {raw['steps']}' is not a positive integer")
    return Settings(
        start=_number(raw["start"], "start", path) or 0.0,
        duration=_number(raw["duration"], "duration", path) or 0.0,
        steps=int(steps),
        variables=_list(raw["variables"]),
        absolute=_number(raw.get("absolute", ""), "absolute", path),
        relative=_number(raw.get("relative", ""), "relative", path),
        amount=_list(raw.get("amount", "")),
        concentration=_list(raw.get("concentration", "")),
        output=_list(raw.get("output", "")),
        mean_range=_range(raw.get("meanrange", ""), "meanRange", path),
        sd_range=_range(raw.get("sdrange", ""), "sdRange", path),
        raw=raw,
    )


@dataclass(frozen=True)
class Case:
    number: str  # "00001"
    folder: Path

    def file(self, suffix: str) -> Path:
        return self.folder / f"{self.number}-{suffix}"

    @property
    def settings_path(self) -> Path:
        return self.file("settings.txt")

    def settings(self) -> Settings:
        return read_settings(self.settings_path)

    def test_type(self) -> str:
        """The `testType:` of NNNNN-model.m ('' when there is none)."""
        path = self.file("model.m")
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        m = re.search(r"^\s*testType:\s*(\S+)", text, re.MULTILINE)
        return m.group(1) if m else ""

    def model_path(self) -> Path:
        """The case's SBML file: l3v2 if there is one, else the highest level/version."""
        found = []
        for p in self.folder.glob(f"{self.number}-sbml-l*v*.xml"):
            m = re.fullmatch(rf"{self.number}-sbml-l(\d+)v(\d+)\.xml", p.name)
            if m:
                found.append(((int(m.group(1)), int(m.group(2))), p))
        if not found:
            raise CaseError(f"{self.folder}: no {self.number}-sbml-lXvY.xml model file")
        for lv, p in found:
            if lv == (3, 2):
                return p
        return max(found)[1]

    def expected(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Semantic results: (times, {column: values})."""
        return read_results(self.file("results.csv"))


def read_results(path: Path) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    try:
        with path.open(newline="", encoding="utf-8", errors="replace") as fh:
            rows = [r for r in csv.reader(fh) if r and any(c.strip() for c in r)]
    except OSError as exc:
        raise CaseError(f"{path}: {exc.strerror}") from None
    if len(rows) < 2:
        raise CaseError(f"{path}: no result rows")
    header = [h.strip() for h in rows[0]]
    try:
        values = np.array([[float(c.strip()) for c in r] for r in rows[1:]], dtype=float)
    except ValueError as exc:
        raise CaseError(f"{path}: {exc}") from None
    if values.shape[1] != len(header):
        raise CaseError(f"{path}: rows have {values.shape[1]} columns, header {len(header)}")
    # the first column is the time, whatever its name: a model may have a variable
    # called 'time' or 'Time' (case 01821 has both, and a 'Time' time column)
    columns = {h: values[:, j] for j, h in enumerate(header) if j > 0}
    return values[:, 0], columns


def parse_selection(text: str | None) -> set[int] | None:
    """'1-100,250' -> {1, ..., 100, 250}; None -> None (all cases). An empty or blank
    list is an OptionError: `--cases ""` (a shell variable left empty) ran all 1,457."""
    if text is None:
        return None
    if not text.strip(" ,"):
        raise OptionError("cases", f"{text!r}: no case numbers (leave --cases out to run "
                                   f"every case)")
    chosen: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        m = re.fullmatch(r"(\d+)\s*(?:-\s*(\d+))?", part)
        if not m:
            raise OptionError("cases", f"{part!r} is not a case number or a range like 1-100")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        if hi < lo:
            raise OptionError("cases", f"{part!r}: the range runs backwards")
        chosen.update(range(lo, hi + 1))
    return chosen


def find_cases(directory: str | Path, selection: set[int] | None = None) -> list[Case]:
    """The case folders under `directory` (itself a case folder, or a folder of
    them), in number order, restricted to `selection`."""
    root = Path(directory)
    if not root.is_dir():
        raise OptionError("cases-dir", f"{root} is not a folder")
    folders = [root] if re.fullmatch(r"\d{5}", root.name) else sorted(
        p for p in root.iterdir() if p.is_dir() and re.fullmatch(r"\d{5}", p.name))
    cases = [Case(f.name, f) for f in folders]
    if selection is not None:
        cases = [c for c in cases if int(c.number) in selection]
    return cases
