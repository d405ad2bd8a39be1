"""The ode backend's numpy CPU engine (what the CPU path runs where no C++ compiler is
found) on a sample of the semantic SBML Test Suite. CI has a compiler, so its other
suite tests run the native engine; this engine once failed 290 cases (amount() and []
outputs on its reference path, events whose triggers hold no comparison) that no test
saw. Every sampled case must pass or be a typed refusal of what only the kernel does
(delay(), fast reactions, distrib draws); the whole suite's figures are in
docs/ode.md."""

from __future__ import annotations

import pytest

from .shared_data import SEMANTIC, parameters

#: the cases that failed (wrong values at t = 0: events without comparisons; amount()
#: outputs on the reference path), then an even sample of the rest
PICKED = ["01284", "01527", "01578", "01663", "00652", "00662", "00731", "01772", "01779"]
SAMPLE_STEP = 15
#: what the engine may refuse, and the case tag that must then be there
REFUSED = {"delay()": "CSymbolDelay", "fast reactions": "FastReaction",
           "distrib draw": "distrib"}


def _cases() -> list[str]:
    if not SEMANTIC.is_dir():
        return []
    found = sorted(p.name for p in SEMANTIC.iterdir() if p.name.isdigit())
    return sorted(set(found[::SAMPLE_STEP]) | {c for c in PICKED if (SEMANTIC / c).is_dir()})


@pytest.mark.parametrize("case", parameters(_cases(), SEMANTIC, "the semantic SBML Test Suite"))
def test_a_semantic_case_on_the_numpy_engine(case):
    from sbmlgpu.testsuite import RunConfig, find_cases, run_case

    (found,) = find_cases(SEMANTIC, {int(case)})
    outcome = run_case(found, RunConfig(backend="ode", device="cpu",
                                        options=(("cpu_engine", "numpy"),)))
    if outcome.status == "skip":
        if "not a time course" in outcome.message:
            return
        # a refusal only of what the case has: its tags (model.m) or its SBML's package
        case_text = " ".join(f.read_text(errors="replace")
                             for f in sorted((SEMANTIC / case).iterdir())
                             if f.suffix in (".m", ".xml"))
        assert any(word in outcome.message and tag in case_text
                   for word, tag in REFUSED.items()), \
            f"{case}: refused without the feature: {outcome.message}"
        return
    assert outcome.status == "pass", f"{case}: {outcome.status}: {outcome.message}"
