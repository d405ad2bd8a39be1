"""The words for a PEtab objective's failed sets (core/petab/messages.py): formed when
read, from each set's status and first failing run, yet every failed set has its
message, as the eager dict had: the run's condition, then the backend's own words or
the status's message; a likelihood that is not finite reads its own message."""

from __future__ import annotations

import numpy as np
import pytest

from sbmlgpu.petab.messages import FailureMessages, first_failures
from sbmlgpu.results import Status

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning",
                                        "ignore::FutureWarning", "ignore::UserWarning")


def test_a_set_fails_with_its_first_failing_run():
    ok, nf, steps = int(Status.ok), int(Status.non_finite), int(Status.max_steps)
    runs = np.array([[ok, nf, ok, ok, steps],
                     [steps, steps, ok, nf, nf]], np.int8)
    status, first = first_failures(runs)
    assert status.tolist() == [steps, nf, ok, nf, steps]
    assert first.tolist() == [1, 0, -1, 1, 0]


def test_messages_name_the_run_and_prefer_the_backends_words():
    ok, nf, steps = int(Status.ok), int(Status.non_finite), int(Status.max_steps)
    status, first = first_failures(np.array([[ok, nf, ok, steps], [nf, ok, ok, ok]], np.int8))
    messages = FailureMessages(status, first, ["condition a", "condition b after pre"],
                               {(0, 1): "went NaN at t = 3", (1, 2): "never read: set 2 is ok"})
    assert len(messages) == 3 and list(messages) == [0, 1, 3]
    assert messages[0] == f"condition b after pre: {Status.non_finite.message}"
    assert messages[1] == "condition a: went NaN at t = 3"
    assert messages[3] == f"condition a: {Status.max_steps.message}"
    assert 2 not in messages and messages.get(2, "none") == "none"
    with pytest.raises(KeyError):
        messages[2]
    with pytest.raises(KeyError):
        messages[99]
    # a status set afterwards (the objective's non-finite likelihood) is seen, with no run
    status[2] = int(Status.non_finite)
    assert messages[2] == Status.non_finite.message and len(messages) == 4
    assert dict(messages) == {j: messages[j] for j in (0, 1, 2, 3)}
    assert "4 failed sets" in repr(messages)
    # keys as a dict of set numbers has them: others are simply not there
    for key in ("1", 1.5, None):
        assert key not in messages and messages.get(key) is None
    # sets failed before any run (a parameter value that is not finite): no condition
    messages.unrun(np.array([False, True, False, False]))
    assert messages[1] == Status.non_finite.message


def test_an_objective_lists_every_failed_set_with_its_condition(tmp_path):
    pytest.importorskip("petab.v1", reason="the petab extra is not installed")
    from sbmlgpu.petab import objective
    from sbmlgpu.petab.result import NON_FINITE_OBJECTIVE

    from .test_petab_problem import write_problem

    prepared = objective(write_problem(tmp_path), device="cpu")
    # set 1 overflows in condition c2 only (kp_c2 is c2's kp); set 2's sigma of 0 makes
    # its likelihood infinite after simulations that all succeed
    result = prepared.evaluate(prepared.sets({"kd": [0.5] * 4, "kp_c2": [2, 1e308, 2, 2],
                                              "sigma_A": [0.2, 0.2, 0.0, 0.2]}))
    assert result.status.tolist() == [0, int(Status.non_finite), int(NON_FINITE_OBJECTIVE), 0]
    failures = result.failures()
    assert [j for j, _, _ in failures] == [1, 2]
    assert failures[0][2].startswith("condition c2: a state became NaN or infinite")
    assert failures[1][2] == NON_FINITE_OBJECTIVE.message
    assert dict(result.messages) == {1: failures[0][2], 2: failures[1][2]}
