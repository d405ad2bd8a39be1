"""The outcome of one case, its one-line report and its JSON record, and the
closing line over all of them.

A case is skipped for one of two reasons only, and the two are counted apart:
REFUSED (the model uses a feature the simulator declines, with a typed
UnsupportedModelError) and NOT_TIME_COURSE (the suite's testType is not a time
course, e.g. FluxBalanceSteadyState). Anything else that stops a case is a FAIL.
"""

from __future__ import annotations

from dataclasses import dataclass

from .compare import Worst

PASS, FAIL, SKIP = "pass", "fail", "skip"
REFUSED, NOT_TIME_COURSE = "refused", "not_time_course"  # why a case is skipped
_SKIP_WORDS = {REFUSED: ("refused feature", "refused features"),
               NOT_TIME_COURSE: ("not a time course", "not time courses")}


@dataclass
class Outcome:
    case: str
    status: str  # PASS, FAIL or SKIP
    message: str = ""
    worst: Worst | None = None
    seconds: float = 0.0
    model: str = ""
    skipped_as: str = ""  # SKIP only: REFUSED or NOT_TIME_COURSE

    def __post_init__(self) -> None:
        if (self.status == SKIP) != (self.skipped_as in _SKIP_WORDS):
            raise ValueError(f"case {self.case}: a skip needs its reason ({REFUSED} or "
                             f"{NOT_TIME_COURSE}), and only a skip has one")

    @classmethod
    def refused(cls, case: str, message: str) -> "Outcome":
        return cls(case, SKIP, message, skipped_as=REFUSED)

    @classmethod
    def not_time_course(cls, case: str, message: str) -> "Outcome":
        return cls(case, SKIP, message, skipped_as=NOT_TIME_COURSE)

    def line(self) -> str:
        """`NNNNN pass`, `NNNNN FAIL <why>` or `NNNNN skipped: <reason>`."""
        first = self.message.strip().splitlines()[0] if self.message.strip() else ""
        if self.status == PASS:
            return f"{self.case} pass"
        if self.status == SKIP:
            return f"{self.case} skipped: {first}"
        return f"{self.case} FAIL {first}".rstrip()

    def record(self) -> dict:
        return {"case": self.case, "status": self.status, "skipped_as": self.skipped_as or None,
                "message": self.message, "worst": self.worst.as_dict() if self.worst else None,
                "seconds": round(self.seconds, 3), "model": self.model}

    @classmethod
    def from_record(cls, r: dict) -> "Outcome":
        worst = Worst(r["worst"]["variable"], r["worst"]["time"], float(r["worst"]["got"]),
                      float(r["worst"]["expected"]), float(r["worst"]["error_over_tolerance"])) \
            if r.get("worst") else None
        return cls(r["case"], r["status"], r.get("message", ""), worst, r.get("seconds", 0.0),
                   r.get("model", ""), r.get("skipped_as") or "")


def tally(outcomes) -> dict[str, int]:
    """{'passed', 'failed', 'skipped', REFUSED, NOT_TIME_COURSE: count}."""
    outcomes = list(outcomes)
    counts = {"passed": sum(o.status == PASS for o in outcomes),
              "failed": sum(o.status == FAIL for o in outcomes),
              "skipped": sum(o.status == SKIP for o in outcomes)}
    for why in _SKIP_WORDS:
        counts[why] = sum(o.skipped_as == why for o in outcomes)
    return counts


def closing_line(counts: dict[str, int]) -> str:
    """`N passed, N failed, N skipped`, then how the skips divide, e.g.
    `1358 passed, 0 failed, 99 skipped (72 refused features, 27 not time courses)`."""
    line = f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped"
    if not counts["skipped"]:
        return line
    parts = [f"{counts[why]} {one if counts[why] == 1 else many}"
             for why, (one, many) in _SKIP_WORDS.items() if counts[why]]
    return f"{line} ({', '.join(parts)})"
