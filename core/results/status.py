"""Per-member outcome of an ensemble, with a message that tells the user what to do.

Like diffrax's RESULTS, but extensible: core defines the outcomes every integrator
knows (ok, max_steps, step_size_underflow, non_finite, failed, and the limits of a
long integration: max_steps_per_interval, time_limit), and a backend adds
its own with `Status.define(name, message)` (e.g. a stochastic backend's "a
propensity became negative"). A status is an int (its code), so arrays of codes
(int8) travel through kernels and files; files also store the names, so a reader
maps codes back by name. Kernels get the codes from Python
(`Status.c_defines()`), never from a hand-copied list.
"""

from __future__ import annotations

import keyword

import numpy as np

MAX_CODE = 127  # codes are stored as int8


class _StatusType(type):
    """Iteration, len and `__members__` over the defined statuses, in code order (the
    parts of the IntEnum interface that callers use)."""

    def __iter__(cls):
        return iter(sorted(cls._by_code.values()))

    def __len__(cls):
        return len(cls._by_code)

    @property
    def __members__(cls) -> dict[str, "Status"]:
        return dict(cls._by_name)


class Status(int, metaclass=_StatusType):
    """One member's outcome: an int code with a `name` and a `message`.

    `Status(3)` and `Status.non_finite` are the same object; `Status.define(...)`
    adds one."""

    _by_code: dict[int, "Status"] = {}
    _by_name: dict[str, "Status"] = {}

    def __new__(cls, code):
        if isinstance(code, Status):
            return code
        try:
            return cls._by_code[int(code)]
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{code!r} is not a status code (defined: "
                             f"{', '.join(f'{s.name}={int(s)}' for s in cls)})") from None

    def __getnewargs__(self):
        return (int(self),)

    @classmethod
    def define(cls, name: str, message: str, code: int | None = None) -> "Status":
        """The status called `name`, defined now if it is new (with the next free code,
        or `code`). Defining an existing name again with the same message returns it;
        with another message or code it is an error (two plugins disagreeing)."""
        if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_"):
            raise ValueError(f"status name {name!r} must be a plain identifier")
        existing = cls._by_name.get(name)
        if existing is not None:
            if existing.message != message or (code is not None and code != int(existing)):
                raise ValueError(f"status {name!r} is already defined as code "
                                 f"{int(existing)} with another message")
            return existing
        if name in vars(cls) or hasattr(int, name):
            raise ValueError(f"status name {name!r} would hide an attribute of Status")
        if code is None:
            code = next(c for c in range(MAX_CODE + 1) if c not in cls._by_code)
        if not 0 <= code <= MAX_CODE or code in cls._by_code:
            raise ValueError(f"status code {code} is taken or outside 0..{MAX_CODE}")
        status = int.__new__(cls, code)
        status._name = name
        status._message = message
        cls._by_code[code] = status
        cls._by_name[name] = status
        setattr(cls, name, status)
        return status

    @property
    def name(self) -> str:
        return self._name

    @property
    def message(self) -> str:
        return self._message

    @property
    def is_ok(self) -> bool:
        return int(self) == 0

    def __repr__(self) -> str:
        return f"Status.{self._name}"

    def __str__(self) -> str:
        return self._name

    @classmethod
    def parse(cls, value) -> "Status":
        """A Status from a Status, its integer code or its name (as solvers report
        it, e.g. the reference's 'ok'); any other failure name is `failed`."""
        if isinstance(value, Status):
            return value
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            return cls(int(value))
        name = str(value).strip().lower().replace("-", "_").replace(" ", "_")
        name = _ALIASES.get(name, name)
        return cls._by_name.get(name, cls._by_name["failed"])

    @classmethod
    def all_defined(cls, codes: np.ndarray) -> bool:
        """True when every code in the integer array `codes` is a defined status: a
        range check, and a table lookup only where the defined codes have gaps (an
        ensemble of 10^7 members must not pay for a set-membership test)."""
        # the ufuncs' reductions themselves: ndarray.min and max go through Python wrappers
        low = int(np.minimum.reduce(codes, axis=None))
        high = int(np.maximum.reduce(codes, axis=None))
        if low < 0 or high > max(cls._by_code):
            return False
        if len(cls._by_code) == max(cls._by_code) + 1:  # 0..max all defined
            return True
        table = np.zeros(max(cls._by_code) + 1, dtype=bool)
        table[list(cls._by_code)] = True
        return bool(table[codes].all())

    @classmethod
    def names(cls) -> np.ndarray:
        """The name of every code from 0 to the largest defined ('' for gaps): what a
        file stores beside the codes."""
        top = max(cls._by_code)
        return np.array([cls._by_code[c].name if c in cls._by_code else ""
                         for c in range(top + 1)], dtype=str)

    @classmethod
    def from_names(cls, codes: np.ndarray, names) -> np.ndarray:
        """Codes written with the name table `names` -> this process's codes (a
        status a reader does not know becomes `failed`)."""
        names = [str(n) for n in names]
        table = np.array([int(cls.parse(n)) if n else int(cls.failed) for n in names]
                         or [0], dtype=np.int8)
        codes = np.asarray(codes).astype(np.int64)
        if codes.size and (codes.min() < 0 or codes.max() >= len(names)):
            raise ValueError(f"status codes outside the file's table of {len(names)} names")
        return table[codes] if codes.size else codes.astype(np.int8)

    @classmethod
    def c_defines(cls, prefix: str = "SBMLGPU_STATUS_") -> str:
        """`#define SBMLGPU_STATUS_OK 0` ... for every defined status: kernels write
        these codes, so they come from here, not from a copied list."""
        return "\n".join(f"#define {prefix}{s.name.upper()} {int(s)}" for s in cls)


# Names other solvers use for the same outcomes (the CPU reference, scipy, diffrax).
_ALIASES = {
    "success": "ok",
    "successful": "ok",
    "nonfinite_state": "non_finite",
    "nonfinite": "non_finite",
    "nan": "non_finite",
    "max_steps_reached": "max_steps",
    "too_many_steps": "max_steps",
    "dt_min_reached": "step_size_underflow",
    "step_too_small": "step_size_underflow",
}

Status.define("ok", "reached the end time", code=0)
Status.define("max_steps", (
    "the solver took its maximum number of steps before the end time: raise the "
    "step limit, shorten the time span, or use a stiff (implicit) method if the "
    "model is stiff"), code=1)
Status.define("step_size_underflow", (
    "the step size fell below the smallest the solver allows: the model is stiff "
    "or runs into a singularity (e.g. a division by zero) at this time; loosen "
    "rtol/atol, use a stiff method, or check the parameter values of this member"), code=2)
Status.define("non_finite", (
    "a value became NaN or infinite: check this member's parameter values and "
    "initial values (division by zero, log or sqrt of a negative number, overflow "
    "from unbounded growth)"), code=3)
Status.define("failed", (
    "the simulation of this member failed: see the member's message for the "
    "reason"), code=4)
Status.define("max_steps_per_interval", (
    "the solver took its maximum number of steps between two output times (as CVODE's "
    "mxstep): the model is stiff or fast here for this member; raise the per-interval "
    "step limit, add output times, use a stiff method (rodas4), or narrow this "
    "parameter's bounds"), code=5)
Status.define("time_limit", (
    "this member ran past its wall-time limit and was stopped (the rest of the ensemble "
    "finished): raise the time limit, use a stiff method (rodas4) if it is not chosen, "
    "loosen rtol/atol, or narrow the parameter bounds that lead here"), code=6)
