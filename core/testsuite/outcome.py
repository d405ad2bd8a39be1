"""The outcome of one case, its one-line report and its JSON record."""

from __future__ import annotations

from dataclasses import dataclass

from .compare import Worst

PASS, FAIL, SKIP = "pass", "fail", "skip"


@dataclass
class Outcome:
    case: str
    status: str  # PASS, FAIL or SKIP
    message: str = ""
    worst: Worst | None = None
    seconds: float = 0.0
    model: str = ""

    def line(self) -> str:
        """`NNNNN pass`, `NNNNN FAIL <why>` or `NNNNN skipped: <reason>`."""
        first = self.message.strip().splitlines()[0] if self.message.strip() else ""
        if self.status == PASS:
            return f"{self.case} pass"
        if self.status == SKIP:
            return f"{self.case} skipped: {first}"
        return f"{self.case} FAIL {first}".rstrip()

    def record(self) -> dict:
        return {"case": self.case, "status": self.status, "message": self.message,
                "worst": self.worst.as_dict() if self.worst else None,
                "seconds": round(self.seconds, 3), "model": self.model}

    @classmethod
    def from_record(cls, r: dict) -> "Outcome":
        worst = Worst(r["worst"]["variable"], r["worst"]["time"], float(r["worst"]["got"]),
                      float(r["worst"]["expected"]), float(r["worst"]["error_over_tolerance"])) \
            if r.get("worst") else None
        return cls(r["case"], r["status"], r.get("message", ""), worst, r.get("seconds", 0.0),
                   r.get("model", ""))
