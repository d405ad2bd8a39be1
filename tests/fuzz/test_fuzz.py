"""Fuzz test: mutated SBML Test Suite models through the CLI, in-process.

Each mutant (tests/fuzz/generator.py) goes through `sbmlgpu info`, then, when info
accepts it, a short `sbmlgpu run` with the reference backend, and on every
ODE_EVERY-th such input with `--backend ode --cpu` too. Each call runs in a forked
child of this process (cheap: the imports are done once, here), so that a crash of
C code (a segmentation fault) or a hang inside C code is seen and cannot take the
test run down: the parent waits at most TIMEOUT seconds, then kills the child.

Asserted for every input and command:
- no exit 70 (internal error), no death by a signal (a crash), no hang;
- no Python traceback on stderr;
- no unflagged non-finite output: a member whose status is ok has only finite
  values, or values the result flags (its metadata's non_finite_outputs, which the
  run also prints as a note), unless the input itself states a non-finite number (NaN, INF or a literal
  beyond double range, which SBML passes on: the suite has such cases) or the suite
  case's own expected results are non-finite.

CI runs a fixed seed and N inputs (defaults below, within ~4 minutes on 2 cores);
SBMLGPU_FUZZ_SEED and SBMLGPU_FUZZ_N change them (e.g. a nightly job with a fresh
seed and N=2000). A failure message names the seed, the case, the mutation and the
command, and writes the input to the pytest tmp folder to rerun it by hand.
"""

from __future__ import annotations

import faulthandler
import io
import multiprocessing
import os
import re
import signal
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pytest

from ..shared_data import SEMANTIC, missing

from .generator import mutants, suite_models

SEED = int(os.environ.get("SBMLGPU_FUZZ_SEED", "20261124"))
N = int(os.environ.get("SBMLGPU_FUZZ_N", "300"))
TIMEOUT = float(os.environ.get("SBMLGPU_FUZZ_TIMEOUT", "60"))
ODE_EVERY = 6  # ode --cpu compiles C++ per model: a subset keeps CI within budget
RUN = ["--end", "2", "--points", "5", "--format", "npz", "--no-progress"]

REASON = missing(SEMANTIC, "the semantic SBML Test Suite")
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

# A number the input states that is not finite, or beyond double range when read
_NON_FINITE_TEXT = re.compile(r'(?i)(?:"|>)\s*[-+]?(?:nan|inf|infinity)\s*(?:"|<)'
                              r'|[eE]\+?[3-9]\d\d\b|\d{309,}|exponentiale|factorial')


def states_non_finite(text: str) -> bool:
    return _NON_FINITE_TEXT.search(text) is not None


def expects_non_finite(case: str) -> bool:
    """The suite's own expected results for `case` hold NaN or infinity."""
    results = SEMANTIC / case / f"{case}-results.csv"
    if not results.exists():
        return False
    body = results.read_text(encoding="utf-8").lower()
    return "nan" in body or "inf" in body


def _child(conn, argv, result_dir):
    """In the forked child: run the CLI, then read the result back."""
    faulthandler.disable()  # a crash is reported by the parent, without pytest's dump
    out, err = io.StringIO(), io.StringIO()
    code, report = None, []
    try:
        with redirect_stdout(out), redirect_stderr(err):
            from sbmlgpu.cli import main

            code = main(argv)
        if argv[0] == "run" and code in (0, 1):
            report = _non_finite_members(Path(result_dir))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent as a failure
        err.write(f"\nFUZZ HARNESS: {type(exc).__name__}: {exc}")
    conn.send((code, out.getvalue()[-4000:], err.getvalue()[-4000:], report))
    conn.close()
    os._exit(0)  # no atexit handlers, no pytest teardown in the child


def _non_finite_members(outdir: Path) -> list[str]:
    """Members with status ok and a non-finite value, as readable lines."""
    from sbmlgpu.results import io as result_io

    bad = []
    for path in sorted(outdir.glob("*.npz")):
        result = result_io.read(path)
        if getattr(result, "data", None) is None:
            continue
        data = np.asarray(result.data, dtype=float)
        flagged = set((result.metadata or {}).get("non_finite_outputs", {}))
        for m in np.flatnonzero(result.ok):
            finite = np.isfinite(data[m])
            columns = [result.ids[j] for j in np.flatnonzero(~finite.all(axis=0))
                       if result.ids[j] not in flagged]
            if columns:
                bad.append(f"member {m} has status ok but non-finite {', '.join(columns[:6])}")
    return bad


def run_cli(argv: list[str], result_dir: str | None = None, timeout: float = TIMEOUT):
    """(exit code or a description of how the child died, stdout, stderr, non-finite
    report) of `sbmlgpu ARGV` in a forked child."""
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child, args=(send, argv, result_dir))
    child.start()
    send.close()
    got = None
    if receive.poll(timeout):
        try:
            got = receive.recv()
        except EOFError:
            got = None
    child.join(5 if got is not None else 0.1)
    if child.is_alive():
        os.kill(child.pid, signal.SIGKILL)
        child.join()
        if got is None:
            return f"hang (no answer in {timeout:.0f} s)", "", "", []
    if got is None:
        how = child.exitcode
        died = f"killed by signal {-how}" if how is not None and how < 0 else f"exit {how}"
        return f"crash ({died}, no answer)", "", "", []
    return got


def _problems(argv, outcome) -> tuple[list[str], list[str]]:
    """(breakages, unflagged non-finite outputs) of one CLI call."""
    code, _out, err, non_finite = outcome
    command = " ".join(argv[:1] + [a for a in argv[2:] if not a.startswith("/")])
    found = []
    if not isinstance(code, int):
        found.append(f"{command}: {code}")
    elif code == 70:
        found.append(f"{command}: exit 70 (internal error): {err.strip()[-600:]}")
    elif code not in (0, 1, 2):
        found.append(f"{command}: exit {code}: {err.strip()[-600:]}")
    if "Traceback" in err or "FUZZ HARNESS" in err:
        found.append(f"{command}: traceback on stderr: {err.strip()[-800:]}")
    unflagged = [f"{command}: unflagged non-finite output: {'; '.join(non_finite[:3])}"] \
        if non_finite else []
    return found, unflagged


def _warm_up(model: Path, outdir: Path) -> None:
    """Every module the CLI needs imported once here, so that each forked child
    starts with them (importing libsbml, scipy and the plugins costs ~0.7 s a call)."""
    from sbmlgpu.cli import main

    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        assert main(["info", str(model)]) == 0
        assert main(["run", str(model), "--backend", "reference", *RUN, "-o", str(outdir)]) == 0
    _non_finite_members(outdir)


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory):
    """The fuzz run, once for the tests below: {"broken": [...], "non_finite": [...],
    "counts": {...}}, each finding naming the seed's input and where it was kept."""
    tmp_path = tmp_path_factory.mktemp("fuzz")
    cases = suite_models(SEMANTIC)
    assert cases, f"no SBML files under {SEMANTIC}"
    _warm_up(cases[0][1], tmp_path / "warm-up")
    found = {"broken": [], "non_finite": []}
    counts, started, ode_turn = {"inputs": 0, "info ok": 0, "ode runs": 0}, time.time(), 0
    for k, mutant in enumerate(mutants(cases, SEED, N)):
        counts["inputs"] += 1
        model = tmp_path / f"m{k}.xml"
        model.write_text(mutant.text, encoding="utf-8")
        allow = states_non_finite(mutant.text) or expects_non_finite(mutant.case)
        calls = [(["info", str(model)], None)]
        info = run_cli(*calls[0])
        outcomes = [info]
        if info[0] == 0:
            counts["info ok"] += 1
            backends = [["--backend", "reference"]]
            ode_turn += 1
            if ode_turn % ODE_EVERY == 0 and "ode        accepts" in info[1]:
                backends.append(["--backend", "ode", "--cpu"])
                counts["ode runs"] += 1
            for backend in backends:
                outdir = tmp_path / f"out{k}_{backend[1]}"
                calls.append((["run", str(model), *backend, *RUN, "-o", str(outdir)], str(outdir)))
                outcomes.append(run_cli(*calls[-1]))
        kept = tmp_path / f"failing_{k}.xml"
        for (argv, _), outcome in zip(calls, outcomes):
            broken, unflagged = _problems(argv, outcome)
            for key, items in (("broken", broken), ("non_finite", [] if allow else unflagged)):
                found[key] += [f"[{mutant.label}] {item} (input: {kept})" for item in items]
        if any(str(kept) in f for f in found["broken"] + found["non_finite"]):
            model.rename(kept)
    print(f"fuzz: seed {SEED}, {counts}, {time.time() - started:.0f} s")
    found["counts"] = counts
    return found


def _report(findings: list[str], what: str) -> str:
    return (f"fuzz seed {SEED} (rerun: SBMLGPU_FUZZ_SEED={SEED} SBMLGPU_FUZZ_N={N}): "
            f"{len(findings)} {what}:\n" + "\n".join(findings[:40]))


def test_fuzz_no_crash_internal_error_traceback_or_hang(fuzzed):
    assert fuzzed["counts"]["inputs"] == N, "the generator made fewer inputs than asked"
    assert fuzzed["counts"]["info ok"] > N // 10, "almost every mutant refused: a weak fuzz"
    assert not fuzzed["broken"], _report(fuzzed["broken"], "inputs broke sbmlgpu")


def test_fuzz_no_unflagged_non_finite_output(fuzzed):
    assert not fuzzed["non_finite"], _report(fuzzed["non_finite"],
                                             "unflagged non-finite outputs")


def test_harness_sees_crashes_and_hangs(monkeypatch):
    """The harness itself: a crash, a hang and a traceback are reported, not missed."""
    import ctypes

    import sbmlgpu.cli as cli

    code, _out, err, _ = run_cli(["info", "/nonexistent.xml"])
    assert code == 2 and "no such file" in err
    monkeypatch.setattr(cli, "main", lambda argv: ctypes.string_at(0))  # a segfault in C
    assert run_cli(["info", "x"])[0].startswith("crash")
    monkeypatch.setattr(cli, "main", lambda argv: time.sleep(30))
    assert run_cli(["info", "x"], timeout=1)[0].startswith("hang")
    monkeypatch.setattr(cli, "main", lambda argv: 1 / 0)
    outcome = run_cli(["info", "x"])
    assert any("traceback" in p for p in _problems(["info", "x"], outcome)[0]), outcome
