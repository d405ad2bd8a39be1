"""Every command's --help as printed: limits written as a user types them, no
escaped per cent signs, no source-code names where a value belongs (found by a run of
the docs' examples: `at most 1.04858e+06`, `cost 23 %% more`,
`optimized from tuning.OPTIMIZED_FROM_REACTIONS reactions`)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

COMMANDS = [["run"], ["run", "--backend", "ssa"], ["run", "--backend", "reference"],
            ["steady-state"], ["estimate"], ["dbn"], ["petab"], ["testsuite"], ["info"],
            ["omex"]]


@pytest.fixture(scope="module")
def helps() -> dict[str, str]:
    out = {}
    for command in COMMANDS:
        done = subprocess.run([sys.executable, "-m", "sbmlgpu", *command, "--help"],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        out[" ".join(command)] = " ".join(done.stdout.split())  # argparse's wrapping undone
    return out


def test_no_help_text_shows_an_escaped_per_cent_or_a_constants_name(helps):
    for command, text in helps.items():
        assert "%%" not in text, command
        assert not re.search(r"\btuning\.[A-Z_]+", text), command


def test_integer_limits_are_written_whole(helps):
    assert "at most 1048576" in helps["run"]  # --history-nodes
    for command, text in helps.items():
        assert not re.search(r"at (least|most) -?\d(\.\d+)?e\+\d+", text), command
