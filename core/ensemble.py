"""Parameter sets for ensembles: from a table, sampled from distributions, or from a
PEtab parameter table. A parameter set is {SBML id: array of one value per member}.

Random draws come from numpy's Philox, keyed by (seed, a hash of the SBML id): one
independent stream per id, so member i gets the same value of `k1` whatever the
ensemble size, the other ids sampled, or their order.
"""

from __future__ import annotations

import difflib
import hashlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

import numpy as np

from .errors import OptionError
from .text_table import read_records, read_rows

if TYPE_CHECKING:  # pragma: no cover - the IR imports sympy: only for annotations
    from .ir import Network

SETTABLE_KINDS = ("parameter", "species", "compartment", "species_reference")


# -- ids ---------------------------------------------------------------------------
def unknown_id_error(option: str, sbml_id: str, known: Iterable[str], what: str) -> OptionError:
    """OptionError naming the unknown id and the closest known ones."""
    known = sorted(known)
    close = [k for k in known if k.lower() == sbml_id.lower()]  # ids are case-sensitive
    close += [k for k in difflib.get_close_matches(sbml_id, known, n=3) if k not in close]
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    listing = ", ".join(known[:15]) + (" ..." if len(known) > 15 else "")
    return OptionError(option, f"{sbml_id!r} is not {what} of the model{hint} "
                               f"(known: {listing or 'none'})")


def check_ids(network: Network, ids: Iterable[str], option: str = "parameters") -> None:
    """Every id must be a value the user may choose: a parameter, a species' initial
    value, a compartment's size or a stoichiometry, not computed by a rule or an
    initial assignment (which would override the chosen value)."""
    settable = [i for i in (*network.parameter_by_id, *network.species_by_id,
                            *network.compartment_by_id, *network.species_reference_by_id)]
    for sbml_id in ids:
        if network.kind_of(sbml_id) not in SETTABLE_KINDS:
            raise unknown_id_error(option, sbml_id, settable,
                                   "a parameter, species, compartment or species reference")
        if sbml_id in network.assignment_rule_by_variable:
            raise OptionError(option, f"{sbml_id!r} is computed by an assignment rule at all "
                                      f"times; choose the values its rule uses instead")
        if sbml_id in network.initial_assignment_by_variable:
            raise OptionError(option, f"{sbml_id!r} is computed by an initial assignment; "
                                      f"choose the values its assignment uses instead")


# -- tables ------------------------------------------------------------------------
def _number(text: str, where: str, option: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise OptionError(option, f"{where}: {text!r} is not a number") from None


def read_table(path: str | Path, option: str = "parameters") -> dict[str, np.ndarray]:
    """A table of parameter sets: CSV (commas or tabs) with a header of SBML ids and
    one row per member, or NPZ with one 1-D array per id (all of the same length)."""
    path = Path(path)
    if not path.is_file():
        raise OptionError(option, f"{path}: no such file")
    if path.suffix.lower() == ".npz":
        return _read_npz(path, option)
    rows = read_rows(path, option)
    if not rows:
        raise OptionError(option, f"{path}: the table is empty")
    header = [h.strip() for h in rows[0]]
    if len(set(header)) != len(header) or "" in header:
        raise OptionError(option, f"{path}: the header must name each column once: {header}")
    columns: list[list[float]] = [[] for _ in header]
    for line, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise OptionError(option, f"{path}, line {line}: {len(row)} values for "
                                      f"{len(header)} columns")
        for k, text in enumerate(row):
            columns[k].append(_number(text.strip(), f"{path}, line {line}, column "
                                                    f"{header[k]}", option))
    if len(rows) < 2:
        raise OptionError(option, f"{path}: a header but no rows")
    return {h: np.array(c) for h, c in zip(header, columns)}


def _read_npz(path: Path, option: str) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as f:
            table = {k: np.asarray(f[k], dtype=float) for k in f.files}
    except (ValueError, OSError) as exc:
        raise OptionError(option, f"{path}: not a readable .npz of numbers ({exc})") from None
    if not table:
        raise OptionError(option, f"{path}: no arrays")
    for k, v in table.items():
        if v.ndim != 1:
            raise OptionError(option, f"{path}: array {k!r} has shape {v.shape}; need one "
                                      f"value per member (1-D)")
    lengths = {k: len(v) for k, v in table.items()}
    if len(set(lengths.values())) > 1:
        raise OptionError(option, f"{path}: arrays differ in length: {lengths}")
    return table


# -- sampling ------------------------------------------------------------------------
def _id_key(seed: int, sbml_id: str) -> np.ndarray:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) \
            or not 0 <= int(seed) < 2**64:
        raise OptionError("seed", f"{seed!r} is not an integer in [0, 2**64)")
    digest = hashlib.blake2b(sbml_id.encode(), digest_size=8).digest()
    return np.array([int(seed), int.from_bytes(digest, "little")], dtype=np.uint64)


def uniforms(seed: int, sbml_id: str, n: int) -> np.ndarray:
    """n uniforms in the open interval (0, 1) from the Philox stream keyed by
    (seed, id); the first k of them do not depend on n."""
    generator = np.random.Generator(np.random.Philox(key=_id_key(seed, sbml_id)))
    # random() gives multiples of 2**-53 in [0, 1); half a step keeps 0 out, so
    # that log and the normal quantile stay finite.
    return generator.random(n) + 2.0**-54


@dataclass(frozen=True)
class Distribution:
    """One of: uniform(low, high), loguniform(low, high), normal(mean, sd[, low, high])."""

    kind: str
    args: tuple[float, ...]

    def transform(self, u: np.ndarray) -> np.ndarray:
        """Values from uniforms in (0, 1) by the inverse CDF."""
        if self.kind == "uniform":
            low, high = self.args
            return low + (high - low) * u
        if self.kind == "loguniform":
            low, high = np.log(self.args[0]), np.log(self.args[1])
            return np.exp(low + (high - low) * u)
        from scipy.stats import norm, truncnorm

        mean, sd = self.args[:2]
        if len(self.args) == 2:
            return mean + sd * norm.ppf(u)
        low, high = self.args[2:]
        return truncnorm.ppf(u, (low - mean) / sd, (high - mean) / sd, loc=mean, scale=sd)


_SPEC_FORMS = "uniform:LOW:HIGH, loguniform:LOW:HIGH or normal:MEAN:SD[:LOW:HIGH]"


def parse_distribution(text: str, option: str = "sample") -> Distribution:
    kind, *fields = [p.strip() for p in text.split(":")]
    kind = kind.lower()
    counts = {"uniform": (2,), "loguniform": (2,), "normal": (2, 4)}
    if kind not in counts or len(fields) not in counts[kind]:
        raise OptionError(option, f"{text!r} is not a distribution; use {_SPEC_FORMS}")
    args = tuple(_number(f, repr(text), option) for f in fields)
    if not all(math.isfinite(a) for a in args):
        raise OptionError(option, f"{text!r}: the numbers must be finite")
    if kind in ("uniform", "loguniform") and not args[0] < args[1]:
        raise OptionError(option, f"{text!r}: LOW must be below HIGH")
    # draws outside the double range came out as inf, blamed on the model later
    if kind == "uniform" and not math.isfinite(args[1] - args[0]):
        raise OptionError(option, f"{text!r}: HIGH - LOW is beyond the double range")
    if kind == "loguniform" and args[0] <= 0:
        raise OptionError(option, f"{text!r}: loguniform needs 0 < LOW")
    if kind == "normal":
        if args[1] <= 0:
            raise OptionError(option, f"{text!r}: the sd must be positive")
        if len(args) == 4 and not args[2] < args[3]:
            raise OptionError(option, f"{text!r}: LOW must be below HIGH")
        if not math.isfinite(abs(args[0]) + 10.0 * args[1]):
            raise OptionError(option, f"{text!r}: the sd is beyond what doubles can draw")
        if len(args) == 4:
            _check_truncation(text, option, *args)
    return Distribution(kind, args)


def _check_truncation(text: str, option: str, mean: float, sd: float, low: float,
                      high: float) -> None:
    """OptionError where the normal truncated to [low, high] cannot be drawn in
    doubles: an interval many sds from the mean (normal:0:1e-300:1:2, 1e300 sds out)
    made the inverse CDF return inf or NaN for every member."""
    from scipy.stats import truncnorm

    with np.errstate(all="ignore"):
        ends = truncnorm.ppf(np.array([1e-12, 0.5, 1.0 - 1e-12]), (low - mean) / sd,
                             (high - mean) / sd, loc=mean, scale=sd)
    if not (np.all(np.isfinite(ends)) and np.all((low <= ends) & (ends <= high))):
        far = min(abs(low - mean), abs(high - mean)) / sd
        raise OptionError(option, f"{text!r}: [LOW, HIGH] lies {far:.3g} sds from the mean, "
                                  f"too far out in the tail to draw from; give a larger sd "
                                  f"or use uniform:LOW:HIGH")


def parse_sample(text: str, option: str = "sample") -> tuple[str, Distribution]:
    """'ID=SPEC' -> (id, distribution)."""
    sbml_id, sep, spec = text.partition("=")
    if not sep or not sbml_id.strip():
        raise OptionError(option, f"{text!r}: write ID=SPEC, SPEC being {_SPEC_FORMS}")
    return sbml_id.strip(), parse_distribution(spec, option)


def sample(specs: Mapping[str, Distribution | str], n: int, seed: int) -> dict[str, np.ndarray]:
    """n values of every id, drawn from its distribution."""
    check_ensemble_size(n, len(specs))
    out = {}
    for sbml_id, dist in specs.items():
        if isinstance(dist, str):
            dist = parse_distribution(dist)
        out[sbml_id] = dist.transform(uniforms(seed, sbml_id, n))
    return out


def sample_table(specs: Mapping[str, Distribution | str], ids: Sequence[str], n: int,
                 seed: int, dtype=np.float64, threads: int | None = None) -> np.ndarray:
    """`sample`'s draws as one (len(ids), n) array of `dtype` (rows in `ids`' order):
    the same numbers, each row drawn and transformed on its own thread (numpy's
    generators and ufuncs release the GIL) straight into its place, without the
    dictionary and the copies of stacking and converting it (3e6 members x 15 ids:
    1.7 s on two cores before)."""
    check_ensemble_size(n, len(ids))
    table = np.empty((len(ids), n), dtype=dtype)
    if not len(ids):
        return table

    def fill(j: int) -> None:
        dist = specs[ids[j]]
        dist = parse_distribution(dist) if isinstance(dist, str) else dist
        table[j] = dist.transform(uniforms(seed, ids[j], n))

    from .runtime.host import host_cores
    from .runtime.host_memory import available_memory

    # a thread holds about three float64 rows at once (the uniforms, the transform's
    # temporary, its result) besides the table: no more threads than memory allows
    by_memory = max(1, int(available_memory() // max(24 * n, 1)))
    workers = max(1, min(len(ids), threads or host_cores(), by_memory))
    if workers == 1:
        for j in range(len(ids)):
            fill(j)
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(fill, range(len(ids))))
    return table


def check_ensemble_size(n: int, ids: int = 0) -> None:
    """A positive size whose `ids` columns of draws fit in memory (checked before
    drawing: --ensemble 10^10 is an OptionError, not a MemoryError minutes later)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise OptionError("ensemble", f"{n!r}: the ensemble size must be a positive integer")
    from .tasks.limits import physical_memory

    need, limit = int(n) * ids * 8 * 2, physical_memory()  # the draws and their transform
    if ids and limit and need > limit:
        raise OptionError("ensemble", f"{n:,} members x {ids} sampled id(s) would need "
                                      f"{need / 1e9:.3g} GB for the parameter sets; the "
                                      f"limit is {limit / 1e9:.3g} GB (this machine's memory)")


# -- PEtab -----------------------------------------------------------------------------
@dataclass(frozen=True)
class PetabParameter:
    id: str
    scale: str  # lin, log, log10
    lower: float
    upper: float
    nominal: float
    estimate: bool

    def sample(self, seed: int, n: int) -> np.ndarray:
        """Uniform on the parameter's scale within its bounds (PEtab gives bounds
        and nominal values on the linear scale); the nominal value if not estimated."""
        if not self.estimate:
            return np.full(n, self.nominal)
        forward = {"lin": lambda x: x, "log": math.log, "log10": math.log10}[self.scale]
        back = {"lin": lambda x: x, "log": np.exp, "log10": lambda x: 10.0**x}[self.scale]
        low, high = forward(self.lower), forward(self.upper)
        return back(low + (high - low) * uniforms(seed, self.id, n))


def read_petab_parameters(path: str | Path, option: str = "petab-parameters") -> list[PetabParameter]:
    have, rows = read_records(path, option)
    need = ("parameterId", "parameterScale", "lowerBound", "upperBound", "nominalValue",
            "estimate")
    missing = [c for c in need if c not in have]
    if missing:
        raise OptionError(option, f"{path}: not a PEtab parameter table (missing "
                                  f"columns: {', '.join(missing)})")
    out = []
    for line, row in enumerate(rows, start=2):
        out.append(_petab_row(row, f"{path}, line {line}", option))
    return out


def _petab_row(row: dict, where: str, option: str) -> PetabParameter:
    pid = row["parameterId"].strip()
    scale = (row["parameterScale"] or "lin").strip()
    if scale not in ("lin", "log", "log10"):
        raise OptionError(option, f"{where}: parameterScale {scale!r} of {pid} is not "
                                  f"lin, log or log10")
    flag = (row["estimate"] or "").strip()
    if flag not in ("0", "1", "0.0", "1.0", "true", "false", "True", "False"):
        raise OptionError(option, f"{where}: estimate of {pid} is {flag!r}; PEtab allows 0 "
                                  f"or 1")
    estimate = flag in ("1", "1.0", "true", "True")

    def value(column: str) -> float:
        text = (row.get(column) or "").strip()
        return _number(text, f"{where}, {column} of {pid}", option) if text else math.nan

    lower, upper, nominal = value("lowerBound"), value("upperBound"), value("nominalValue")
    if estimate:
        if not (math.isfinite(lower) and math.isfinite(upper) and lower < upper):
            raise OptionError(option, f"{where}: {pid} is estimated but its bounds "
                                      f"[{lower}, {upper}] are not a finite interval")
        if scale != "lin" and lower <= 0:
            raise OptionError(option, f"{where}: {pid} has scale {scale} but lowerBound "
                                      f"{lower} is not positive")
    elif not math.isfinite(nominal):
        raise OptionError(option, f"{where}: {pid} is not estimated and has no nominalValue")
    return PetabParameter(pid, scale, lower, upper, nominal, estimate)


def sample_petab(path: str | Path, n: int, seed: int,
                 network: Network | None = None) -> tuple[dict[str, np.ndarray], list[str]]:
    """Parameter sets from a PEtab parameter table: estimated parameters sampled
    within their bounds on their scale, the others at their nominal value.
    Returns (sets, ids left out): a PEtab table also lists observable and noise
    parameters, which are not in the SBML model; those are left out, not an error."""
    table = read_petab_parameters(path)
    check_ensemble_size(n, len(table))
    left_out = [p.id for p in table
                if network is not None and network.kind_of(p.id) not in SETTABLE_KINDS]
    sets = {p.id: p.sample(seed, n) for p in table if p.id not in left_out}
    return sets, left_out


# -- putting sets together -------------------------------------------------------------------
def combine(network: Network | None, *, table: str | Path | None = None,
            samples: Sequence[str] | Mapping[str, Distribution | str] = (),
            petab: str | Path | None = None, n: int | None = None,
            seed: int = 0) -> tuple[dict[str, np.ndarray] | None, int, list[str],
                                    dict[str, str]]:
    """Everything the CLI's --parameters, --sample, --petab-parameters, --ensemble and
    --seed ask for, as (parameter sets or None, ensemble size, notes for the user,
    {id: the option that gave it}).

    The table fixes the ensemble size (--ensemble must agree with it); sampling
    needs a size from the table or --ensemble. An id given twice is an error. The
    ids themselves are checked against the model once, by the task
    (TimeCourse.check_network), which names the option from the sources."""
    notes: list[str] = []
    sets: dict[str, np.ndarray] = {}
    sources: dict[str, str] = {}

    def add(new: dict[str, np.ndarray], source: str) -> None:
        for k, v in new.items():
            if k in sets:
                raise OptionError(source, f"{k!r} is already given by {sources[k]}")
            sets[k], sources[k] = np.asarray(v, dtype=float), source

    if n is not None:
        check_ensemble_size(n)
    if table is not None:
        values = read_table(table)
        rows = len(next(iter(values.values())))
        if n is not None and n != rows:
            raise OptionError("ensemble", f"{n} members asked for, but {table} has {rows} rows")
        n = rows
        add(values, "parameters")
    if isinstance(samples, Mapping):
        specs = dict(samples)
    else:
        specs = {}
        for text in samples:
            sbml_id, dist = parse_sample(text)
            if sbml_id in specs:
                raise OptionError("sample", f"{sbml_id!r} is sampled twice")
            specs[sbml_id] = dist
    if (specs or petab is not None) and n is None:
        raise OptionError("ensemble", "sampling needs an ensemble size: give --ensemble N "
                                      "(or a --parameters table)")
    if specs:
        add(sample(specs, n, seed), "sample")
    if petab is not None:
        values, left_out = sample_petab(petab, n, seed, network)
        if left_out:
            notes.append(f"{len(left_out)} PEtab parameter(s) are not in the model and were "
                         f"left out: {', '.join(left_out[:10])}{' ...' if len(left_out) > 10 else ''}")
        add(values, "petab-parameters")
    return (sets or None), (n or 1), notes, sources
